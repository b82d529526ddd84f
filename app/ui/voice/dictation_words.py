"""What the window says about dictation: the mic button's tooltip, the listening bar's lines, and each way it can end."""

from __future__ import annotations

from app.service.voice.dictation_events import DictationAvailability, DictationFinished, VoiceMissing
from app.voice.device_words import device_words
from app.voice.devices import DeviceUnavailable
from app.voice.transcriber import FailureKind

SHORTCUT = "Ctrl+Shift+Space"
READY_TIP = f"Dictate: speak, and your words go in the message box ({SHORTCUT})"
LISTENING_TIP = f"Stop dictating ({SHORTCUT}); the words so far go in the message box"
OPENING = "Opening the microphone…"
LISTENING = "Listening… speak now"
HEARING = "Hearing you…"
FINISHING = "Writing down your last words…"
NOTHING_HEARD = "No speech was heard. Press the microphone and speak, or check the microphone in Settings → Voice."
_INSTALL = "pip install 'kestrel[voice]' (on Linux also the libportaudio2 package)"
_NOT_HEARD = {
    FailureKind.TIMED_OUT: "took too long",
    FailureKind.DIED: "the transcriber stopped",
    FailureKind.LOAD_FAILED: "the speech model could not be loaded",
    FailureKind.FAILED: "transcribing failed",
}


def missing_words(missing: VoiceMissing, detail: str) -> str:
    if missing is VoiceMissing.VOICE_PACKAGES:
        return (f"Dictation needs Kestrel's voice packages, which are not installed (missing: {detail}). "
                f"Install them with {_INSTALL}, then start Kestrel again.")
    return f"Dictation cannot start. {detail}"


def unavailable_tip(availability: DictationAvailability) -> str:
    """The mic button's tooltip: what it does, or why it cannot and what to do."""
    if availability.missing is None:
        return READY_TIP
    return f"{missing_words(availability.missing, availability.detail)} Press to see this again."


def finished_words(finished: DictationFinished) -> str:
    """Why dictation ended, when it did not end well ("" when it did, with words heard)."""
    if finished.missing is not None:
        return missing_words(finished.missing, finished.detail)
    if finished.problem is not None:
        return device_words(DeviceUnavailable(finished.problem, finished.detail))
    if finished.error:
        kept = " What was heard is in the message box." if finished.text else ""
        return f"Dictation stopped because of a fault in Kestrel ({finished.error}).{kept} Press the microphone to try again."
    return "" if finished.text else NOTHING_HEARD


def not_heard_words(failure: FailureKind) -> str:
    return f"Some of what you said could not be written down ({_NOT_HEARD[failure]}). Keep talking, or stop and try again."
