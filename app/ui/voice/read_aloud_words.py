"""What the window says about read-aloud: why an answer could not be read (to its end), and what to do."""

from __future__ import annotations

from app.service.voice.read_aloud_events import ReadAloudFailed, ReadAloudProblem
from app.voice.device_words import device_words
from app.voice.devices import DeviceProblem, DeviceUnavailable
from app.voice.transcriber import FailureKind

SHORTCUT = "Ctrl+Shift+A"
_INSTALL = "pip install 'kestrel[voice]' (on Linux also the libportaudio2 package)"
_FAILED = {
    FailureKind.TIMED_OUT: "The voice took longer than its limit and was stopped. Try again when the computer is less busy.",
    FailureKind.DIED: "The voice stopped unexpectedly ({detail}). Press the speaker again.",
    FailureKind.LOAD_FAILED: ("The voice could not be loaded ({detail}). Reinstall the voice packages: "
                              "pip install --force-reinstall 'kestrel[voice]'."),
    FailureKind.FAILED: "Reading aloud failed ({detail}). Press the speaker again.",
}
_LOST = ("The speaker stopped while the answer was read (was it unplugged?). Plug it back in or choose another "
         "in Settings → Voice, then press the speaker again.")


def failed_words(failed: ReadAloudFailed) -> str:
    """The banner's words for a reading that could not go on."""
    if failed.problem is ReadAloudProblem.VOICE_MISSING:
        if failed.packages:
            return (f"Reading aloud needs Kestrel's voice packages, which are not installed (missing: "
                    f"{', '.join(failed.packages)}). Install them with {_INSTALL}, then start Kestrel again.")
        return f"Reading aloud needs the voice, which is not ready: {failed.detail}"
    if failed.problem is ReadAloudProblem.VOICE_FAILED:
        kind = failed.failure or FailureKind.FAILED
        return _FAILED[kind].format(detail=failed.detail or "no reason given")
    if failed.device is DeviceProblem.DEVICE_LOST:
        return _LOST
    return device_words(DeviceUnavailable(failed.device or DeviceProblem.OPEN_FAILED, failed.detail))
