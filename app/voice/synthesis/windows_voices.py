"""Windows' own voices (those Settings → Time & language → Speech lists and adds), spoken through WinRT's
Windows.Media.SpeechSynthesis with PyWinRT (MIT): no download, in the languages the person installed.

Why WinRT and not SAPI (pyttsx3's way, through comtypes): SAPI sees only the desktop voices of
HKLM\\SOFTWARE\\Microsoft\\Speech\\Voices (David and Zira Desktop on an English Windows); the voices a person
adds in Settings are OneCore voices (HKLM\\SOFTWARE\\Microsoft\\Speech_OneCore), which WinRT lists and SAPI
does not. WinRT gives each utterance as a WAV stream in memory, read here and handed on as 16-bit PCM like a
Piper voice's, so read-aloud, voice mode, `kestrel say` and the API take a Windows voice as they take Joe.

Only the functions named _winrt_* touch Windows; everything else here runs and is tested on every system, fed
with what Windows reports (tests/fixtures/windows_voices.json says where each value was seen). Listing the voices
reads the registry through WinRT and may be called on any worker thread; speaking happens in the synthesis
child (app/voice/synthesis/child.py), whose main thread joins the multithreaded apartment, where PyWinRT's
blocking get() is allowed (it refuses on a single-threaded apartment such as a Qt window's thread).

Not verified on Windows (no Windows machine here): the stream's exact header and sample rate (before Windows 10
1803 it was 22,050 Hz; the rate is read from each stream's header, never assumed), what WinRT does with a rate
outside 0.5-6.0 (Kestrel clamps), and the error a voice whose language pack was removed gives.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import re
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

ON_WINDOWS = sys.platform == "win32"
ID_PREFIX = "windows-"
# What SpeechSynthesizerOptions.SpeakingRate takes (Microsoft's documentation: 0.5 to 6.0, 1.0 the voice's pace).
MIN_RATE, MAX_RATE = 0.5, 6.0
# DataReader.LoadAsync takes a 32-bit count: the stream is read a piece at a time.
_READ_CHUNK = 1 << 20
# The voice list is read again after this long (a voice added in Windows Settings shows without a restart).
_LIST_FRESH_S = 30.0
# HRESULTs seen on real machines (public reports): 0x80070002, a voice's or Windows' speech files missing (N and
# Server editions, a language with no voice); 0x80040154, the speech classes not registered.
_FILE_NOT_FOUND = 0x80070002
_CLASS_NOT_REGISTERED = 0x80040154
_WINDOWS_SPEECH_MODULE = "winrt.windows.media.speechsynthesis"
WINDOWS_VOICE_LICENSE = "Part of Windows, under Windows' licence terms"
WINDOWS_VOICE_SOURCE = "Windows (Settings → Time & language → Speech adds voices)"


@dataclass(frozen=True)
class SystemVoice:
    """One of Windows' voices. id: Kestrel's ("windows-zira"); platform_id: VoiceInformation.Id ("": whichever
    voice Windows uses by default, resolved when it speaks); language: a BCP-47 tag ("en-US", "" when unknown)."""

    id: str
    title: str
    platform_id: str
    language: str
    languages: str = ""  # in words, as Windows writes them ("English (United States)")
    is_default: bool = False
    license: str = WINDOWS_VOICE_LICENSE
    source: str = WINDOWS_VOICE_SOURCE


# The setting's default on Windows: the voice Windows speaks with (Settings → Time & language → Speech).
WINDOWS_DEFAULT = SystemVoice(f"{ID_PREFIX}default", "Windows' voice (as chosen in Windows' settings)", "", "")


@dataclass(frozen=True)
class VoiceFacts:
    """What WinRT says of one voice: VoiceInformation's DisplayName, Id, Language, Description and Gender."""

    display_name: str
    id: str
    language: str
    description: str
    gender: str


@dataclass(frozen=True)
class SystemVoiceSpec:
    """What the synthesis child is told to speak with: Kestrel's id, the voice's words and Windows' id."""

    voice_id: str
    title: str
    platform_id: str


class WindowsVoiceError(Exception):
    """A Windows voice could not speak; the message says why and what to do."""


def windows_speech_here() -> bool:
    """Whether this is Windows with PyWinRT's speech module installed (no Windows call is made)."""
    return ON_WINDOWS and _module_here(_WINDOWS_SPEECH_MODULE)


@functools.cache
def _module_here(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


_listed: tuple[float, tuple[SystemVoice, ...]] | None = None
_listing = threading.Lock()


def system_voices() -> tuple[SystemVoice, ...]:
    """Windows' voices, named for Kestrel (none elsewhere, or when Windows' speech cannot be read: logged). Reads
    the registry through WinRT: call it on a worker thread. Kept for half a minute."""
    global _listed
    if not windows_speech_here():
        return ()
    with _listing:
        if _listed is not None and time.monotonic() - _listed[0] < _LIST_FRESH_S:
            return _listed[1]
        try:
            facts, default_id = _winrt_voice_facts()
        except (ImportError, OSError, RuntimeError, AttributeError) as exc:
            log.warning("Windows' voices could not be listed: %s", exc)
            facts, default_id = [], ""
        _listed = (time.monotonic(), voices_from(facts, default_id))
        return _listed[1]


def voices_from(facts: list[VoiceFacts], default_id: str) -> tuple[SystemVoice, ...]:
    """Kestrel's names for what WinRT listed: "windows-" and the name without "Microsoft " ("Microsoft Zira" →
    windows-zira), the language added when two share a name. Windows lists a voice once per language."""
    names = [_slug(fact.display_name) or _slug(fact.id.rsplit("\\", 1)[-1]) or "voice" for fact in facts]
    voices: list[SystemVoice] = []
    taken: set[str] = set()
    for fact, name in zip(facts, names):
        if names.count(name) > 1:
            name = f"{name}-{_slug(fact.language)}"
        voice_id = f"{ID_PREFIX}{name}"
        while voice_id in taken or voice_id == WINDOWS_DEFAULT.id:
            voice_id += "-2"
        taken.add(voice_id)
        words = fact.description.split(" - ", 1)[1].strip() if " - " in fact.description else fact.language
        voices.append(SystemVoice(voice_id, fact.description or fact.display_name, fact.id, fact.language,
                                  words, fact.id == default_id))
    return tuple(voices)


def _slug(text: str) -> str:
    text = re.sub(r"^microsoft\s+", "", text.strip(), flags=re.IGNORECASE)
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def find_system_voice(voice_id: str) -> SystemVoice | None:
    """A Windows voice by Kestrel's id (any case); WINDOWS_DEFAULT for windows-default."""
    wanted = voice_id.strip().lower()
    if wanted == WINDOWS_DEFAULT.id:
        return WINDOWS_DEFAULT if windows_speech_here() else None
    return next((voice for voice in system_voices() if voice.id == wanted), None)


def spec_of(voice: SystemVoice) -> SystemVoiceSpec:
    return SystemVoiceSpec(voice.id, voice.title, voice.platform_id)


class WindowsSpeaker:
    """In the synthesis child: WinRT's synthesizer with the voice chosen, saying a sentence at a time as 16-bit
    mono PCM at sample_rate (read from the first stream's header). WindowsVoiceError in words when it cannot."""

    def __init__(self, spec: SystemVoiceSpec) -> None:
        self._spec = spec
        self._synthesizer = self._worded(lambda: _winrt_synthesizer(spec.platform_id))
        _, self.sample_rate = self._said("Hello.", 1.0)  # also loads the voice's data before the first sentence

    def say(self, sentence: str, speed: float) -> bytes:
        frames, rate = self._said(sentence, speed)
        if rate != self.sample_rate:  # not seen; kept to one rate per voice so the sentences join
            frames = _resampled(frames, rate, self.sample_rate)
        import numpy as np
        return (np.clip(frames, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()

    def _said(self, text: str, speed: float) -> tuple[np.ndarray, int]:
        from app.voice.audio import AudioRefused, wav_frames
        rate = min(MAX_RATE, max(MIN_RATE, speed))
        wav = self._worded(lambda: _winrt_wav(self._synthesizer, text, rate))
        try:
            return wav_frames(wav)
        except AudioRefused as refused:
            raise WindowsVoiceError(f"Windows gave {self._spec.title}'s speech in a form Kestrel does not read "
                                    f"({refused.problem}: {refused.detail or 'no detail'}). Choose another voice "
                                    "in Settings → Voice.") from refused

    def _worded(self, call: Any) -> Any:
        try:
            return call()
        except VoiceMissing as exc:
            raise WindowsVoiceError(f"The Windows voice {self._spec.title} is not on this computer any more. Add it "
                                    "again in Windows' Settings → Time & language → Speech, or choose another "
                                    "voice in Kestrel's Settings → Voice.") from exc
        except ImportError as exc:
            raise WindowsVoiceError("Windows' voices need PyWinRT, which is not installed with Kestrel here. "
                                    "Install the voice packages (pip install 'kestrel[voice]'), or choose the "
                                    "voice Joe in Settings → Voice.") from exc
        except (OSError, RuntimeError) as exc:  # RuntimeError: PyWinRT refusing to block (not expected here)
            raise WindowsVoiceError(windows_error_words(self._spec.title, exc)) from exc


class VoiceMissing(Exception):
    """The voice asked for is not among those Windows lists (removed since it was chosen)."""


def windows_error_words(title: str, exc: Exception) -> str:
    """What to tell the person when WinRT refused (PyWinRT raises OSError with the HRESULT, signed, as winerror)."""
    code = (getattr(exc, "winerror", None) or 0) & 0xFFFFFFFF
    if code == _FILE_NOT_FOUND:
        return (f"Windows could not speak with {title}: its speech files are missing. Windows N and Server "
                "editions leave them out (install the Media Feature Pack), and a voice whose language was removed "
                "leaves none. Choose another voice in Settings → Voice; Joe ships with Kestrel.")
    if code == _CLASS_NOT_REGISTERED:
        return (f"Windows could not speak with {title}: Windows' speech is not working on this computer (its "
                "parts are not registered). Choose the voice Joe in Settings → Voice.")
    what = getattr(exc, "strerror", None) or str(exc)
    return (f"Windows could not speak with {title} ({what}{f', 0x{code:08X}' if code else ''}). Try again, or "
            "choose another voice in Settings → Voice.")


def _resampled(frames: np.ndarray, rate: int, wanted: int) -> np.ndarray:
    import numpy as np
    count = max(1, round(frames.size * wanted / rate))
    return np.interp(np.linspace(0, frames.size - 1, count), np.arange(frames.size), frames).astype(np.float32)


# --- the calls into Windows -------------------------------------------------------------------------------------


def _speech() -> Any:
    # Loaded by name: PyWinRT is installed on Windows only, and ships its types for Windows only.
    return importlib.import_module(_WINDOWS_SPEECH_MODULE)


def join_multithreaded_apartment() -> None:
    """The synthesis child's thread joins COM's multithreaded apartment (PyWinRT's get() refuses to block in a
    single-threaded one). Already in one, or PyWinRT without the call: nothing to do."""
    try:
        runtime = importlib.import_module("winrt.runtime")
        runtime.init_apartment(runtime.ApartmentType.MULTI_THREADED)
    except (ImportError, AttributeError, OSError, RuntimeError) as exc:
        log.debug("the apartment was not set: %s", exc)


def _winrt_voice_facts() -> tuple[list[VoiceFacts], str]:
    """SpeechSynthesizer.AllVoices and DefaultVoice's id (static members: on the class)."""
    synthesizer = _speech().SpeechSynthesizer
    facts = [VoiceFacts(str(voice.display_name), str(voice.id), str(voice.language), str(voice.description),
                        getattr(voice.gender, "name", str(voice.gender)).lower())
             for voice in synthesizer.all_voices]
    default = synthesizer.default_voice
    return facts, str(default.id) if default is not None else ""


def _winrt_synthesizer(platform_id: str) -> Any:
    """A SpeechSynthesizer speaking with the voice whose Id is platform_id ("": Windows' default), with the least
    silence after each utterance (Windows 10 1803 and later; about 750 ms before, as Microsoft's documentation
    of AppendedSilence says)."""
    speech = _speech()
    synthesizer = speech.SpeechSynthesizer()
    if platform_id:
        chosen = next((voice for voice in speech.SpeechSynthesizer.all_voices if voice.id == platform_id), None)
        if chosen is None:
            raise VoiceMissing(platform_id)
        synthesizer.voice = chosen
    try:
        synthesizer.options.appended_silence = speech.SpeechAppendedSilence.MIN
    except (AttributeError, OSError):  # PyWinRT: AttributeError, or the interface's E_NOINTERFACE
        pass  # an older Windows: the default silence
    return synthesizer


def _winrt_wav(synthesizer: Any, text: str, rate: float) -> bytes:
    """One utterance as the WAV stream WinRT makes of it (the text as plain text: never SSML)."""
    streams = importlib.import_module("winrt.windows.storage.streams")
    try:
        synthesizer.options.speaking_rate = rate
    except (AttributeError, OSError):
        pass  # before Windows 10 1709 there is no rate to set: the voice's own pace
    stream = synthesizer.synthesize_text_to_stream_async(text).get()
    try:
        reader = streams.DataReader(stream.get_input_stream_at(0))
        pieces: list[bytes] = []
        left = int(stream.size)
        while left > 0:
            got = int(reader.load_async(min(left, _READ_CHUNK)).get())
            if got <= 0:
                break
            pieces.append(bytes(reader.read_buffer(got)))
            left -= got
        return b"".join(pieces)
    finally:
        stream.close()
