"""The speech models and voices `GET /v1/models` lists after the chat models, as OpenAI lists whisper-1 and tts-1:
those here to use (shipped, or downloaded in Models → Speech). Their "type" says they do not chat
("speech-to-text": POST /v1/audio/transcriptions takes the id as `model`; "text-to-speech": POST /v1/audio/speech
takes it as `voice` or `model`), and a Kestrel that lists another's models leaves them out
(app/library/servers/listing.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

SPEECH_TO_TEXT = "speech-to-text"
TEXT_TO_SPEECH = "text-to-speech"
SPEECH_TYPES = (SPEECH_TO_TEXT, TEXT_TO_SPEECH)


def speech_entries(speech_folder: Path) -> list[dict[str, Any]]:
    """The entries, in OpenAI's model shape with Kestrel's own fields. Reads the disk: call it on a worker thread."""
    from app.voice.catalog.choice import speech_models, voices
    from app.voice.speech_models import installed_folder, shipped
    from app.voice.synthesis.voices import voice_folder, voice_in_place, voice_shipped
    from app.voice.synthesis.windows_voices import system_voices

    entries: list[dict[str, Any]] = []
    for model in speech_models():
        folder = installed_folder(model, speech_folder)
        if shipped(model) or folder is not None:
            entries.append(_entry(model.id, model.title, SPEECH_TO_TEXT, folder,
                                  ["*"] if model.multilingual else ["en"]))
    for voice in voices():
        if voice_shipped(voice) or voice_in_place(voice, speech_folder):
            entries.append(_entry(voice.id, voice.title, TEXT_TO_SPEECH, voice_folder(voice, speech_folder),
                                  [voice.language]))
    for system in system_voices():  # Windows' own, on Windows
        entries.append(_entry(system.id, system.title, TEXT_TO_SPEECH, None, [system.language] if system.language
                              else []))
    return entries


def _entry(model_id: str, title: str, kind: str, folder: Path | None, languages: list[str]) -> dict[str, Any]:
    try:
        created = int(folder.stat().st_mtime) if folder is not None else 0
    except OSError:
        created = 0
    return {"id": model_id, "object": "model", "created": created, "owned_by": "kestrel", "name": title,
            "type": kind, "languages": languages}
