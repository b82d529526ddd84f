"""Which speech model and which voice: among those that ship and the catalog's (app/voice/catalog/entries.py), by
the id a request, a command or Settings → Voice names, or OpenAI's names, or the language."""

from __future__ import annotations

from app.core.speech_languages import WHISPER_LANGUAGES
from app.core.voice_settings import DETECT_LANGUAGE
from app.voice.catalog.entries import catalog_speech_models, catalog_voices
from app.voice.speech_models import (DEFAULT_SPEECH_MODEL, OPENAI_SPEECH_NAMES, SHIPPED_SPEECH_MODELS, WHISPER_BASE,
                                     SpeechModel, SpeechModelError)
from app.voice.synthesis.voices import OPENAI_VOICES, SHIPPED_VOICES, SpeakingVoice, Voice, VoiceError, default_voice
from app.voice.synthesis.windows_voices import ID_PREFIX as WINDOWS_ID_PREFIX
from app.voice.synthesis.windows_voices import find_system_voice, system_voices, windows_speech_here


def speech_models() -> tuple[SpeechModel, ...]:
    """Every speech-to-text model Kestrel knows: those that ship, then the catalog's, downloaded or not."""
    return (*SHIPPED_SPEECH_MODELS, *catalog_speech_models())


def choose_speech_model(requested: str | None, language: str | None) -> SpeechModel:
    """The model for a request: by id (a shipped model's, or a catalog model's), or for OpenAI's names (and
    none) the default, unless the language asked is not English, which takes the multilingual model.
    SpeechModelError says what to change. A catalog model not downloaded yet says so when it is loaded."""
    if language is not None and language not in WHISPER_LANGUAGES:
        raise SpeechModelError(f"{language!r} is not a language code Whisper knows. Use an ISO 639-1 code "
                               "such as en, de, fr or es, or leave the language out.")
    known = speech_models()
    by_id = {model.id.lower(): model for model in known}
    if requested and requested not in OPENAI_SPEECH_NAMES:
        chosen = by_id.get(requested.strip().lower())
        if chosen is None:
            raise SpeechModelError(f"There is no speech model {requested!r}. Use one of "
                                   f"{', '.join([*(model.id for model in known), *OPENAI_SPEECH_NAMES])}.")
    else:
        chosen = WHISPER_BASE if language not in (None, "en") else DEFAULT_SPEECH_MODEL
    if language not in (None, "en") and not chosen.multilingual:
        many = [model.id for model in known if model.multilingual]
        raise SpeechModelError(f"{chosen.title} transcribes English only. Leave the model out, or choose one that "
                               f"hears 99 languages ({', '.join(many)}), to transcribe {language}.")
    return chosen


def dictation_model(language: str, given: SpeechModel | None = None,
                    chosen: str | None = None) -> tuple[SpeechModel, str | None]:
    """The model dictation listens with for the settings' language, and the language to tell it (None: it
    detects each utterance's). `chosen` (Settings → Voice → Speech model: an id) is used when it can hear the
    language; otherwise English takes tiny.en, any other language or DETECT_LANGUAGE the multilingual model.
    `given` (a test's) is used whatever the language, told it only if it is multilingual."""
    asked = None if language == DETECT_LANGUAGE else language
    if given is not None:
        return given, asked if given.multilingual else None
    picked = next((model for model in speech_models() if model.id == chosen), None) if chosen else None
    if picked is not None and (picked.multilingual or asked == "en"):
        return picked, asked if picked.multilingual else None
    return (DEFAULT_SPEECH_MODEL if asked == "en" else WHISPER_BASE), asked


def voices() -> tuple[Voice, ...]:
    """Every Piper voice Kestrel knows: those that ship, then the catalog's, downloaded or not."""
    return (*SHIPPED_VOICES, *catalog_voices())


def speaking_voices() -> tuple[SpeakingVoice, ...]:
    """The Piper voices, then Windows' own (on Windows: read through WinRT, so call it on a worker thread)."""
    return (*voices(), *system_voices())


def voice_names() -> tuple[str, ...]:
    return tuple(voice.id for voice in speaking_voices())


def choose_voice(requested: str | None) -> SpeakingVoice:
    """The voice by its id (any case), OpenAI's names and none taking the default (default_voice()); VoiceError
    lists the voices. A Windows voice's id ("windows-…") reads Windows' list: call it on a worker thread."""
    name = (requested or "").strip()
    if not name or name.lower() in OPENAI_VOICES:
        return default_voice()
    for voice in voices():
        if voice.id.lower() == name.lower():
            return voice
    if name.lower().startswith(WINDOWS_ID_PREFIX):
        found = find_system_voice(name)
        if found is not None:
            return found
        if not windows_speech_here():
            raise VoiceError(f"{requested!r} is one of Windows' own voices, which Kestrel speaks with on Windows "
                             f"only. Use one of {', '.join(voice_names())}.")
    raise VoiceError(f"There is no voice {requested!r}. Use one of {', '.join(voice_names())} "
                     f"(or one of OpenAI's: {', '.join(OPENAI_VOICES)}, which speak with {default_voice().id}).")
