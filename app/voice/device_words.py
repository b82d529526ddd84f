"""What the person is told when a microphone or speaker cannot be used: what happened and what to do next."""

from __future__ import annotations

import sys

from app.voice.devices import DeviceProblem, DeviceUnavailable

_SETTINGS = "Settings → Voice"
_WORDS = {
    DeviceProblem.NO_SOUND_LIBRARY: ("Kestrel cannot reach the sound system: the PortAudio library is missing. "
                                     "Install the voice packages (pip install 'kestrel[voice]'; on Linux also the "
                                     "libportaudio2 package), then start Kestrel again."),
    DeviceProblem.NO_MICROPHONE: f"No microphone was found: plug one in or choose one in {_SETTINGS}.",
    DeviceProblem.NO_SPEAKER: f"No speaker or headphones were found: plug some in or choose an output in {_SETTINGS}.",
    DeviceProblem.DEVICE_BUSY: (f"The microphone is in use by another program. Close that program or choose "
                                f"another microphone in {_SETTINGS}."),
    DeviceProblem.DEVICE_LOST: ("The sound device stopped (was it unplugged?). What was recorded until then is kept. "
                                f"Plug it back in or choose another in {_SETTINGS}, then try again."),
    DeviceProblem.OPEN_FAILED: (f"Kestrel could not open the sound device ({{detail}}). Check that it is plugged in, "
                                f"or choose another in {_SETTINGS}."),
}
_PERMISSION = {
    "win": ("Windows is not letting Kestrel use the microphone. Open Settings → Privacy & security → Microphone, "
            "turn on \"Let desktop apps access your microphone\", then press the microphone again."),
    "darwin": ("macOS is not letting Kestrel use the microphone. Open System Settings → Privacy & Security → "
               "Microphone, turn Kestrel on, then press the microphone again."),
    "": ("The system refused Kestrel the microphone. Allow it in your system's privacy or sound settings "
         "(on Linux, your user may need to be in the audio group), then press the microphone again."),
}


def device_words(unavailable: DeviceUnavailable, platform: str = sys.platform) -> str:
    if unavailable.problem is DeviceProblem.PERMISSION_REFUSED:
        system = "win" if platform.startswith("win") else "darwin" if platform == "darwin" else ""
        return _PERMISSION[system]
    return _WORDS[unavailable.problem].format(detail=unavailable.detail or "no reason given")
