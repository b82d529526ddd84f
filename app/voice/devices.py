"""The sound system's microphones and speakers, through PortAudio (the `sounddevice` package), listed without opening any.

Why PortAudio through `sounddevice` (MIT; PortAudio itself is MIT-style) and not Qt Multimedia: capture
has to run off the UI thread and feed the voice activity detector and the transcriber, which live in
app/voice below the front ends; Qt Multimedia would pull Qt into that layer, which the layering forbids
(app.voice imports no Qt), and would tie the CLI, the API server and the tests to a QApplication.
PortAudio calls back on its own audio thread with plain NumPy blocks, has one API over WASAPI/MME on
Windows, Core Audio on macOS and ALSA (and through it PulseAudio/PipeWire) on Linux, and sounddevice's
Windows and macOS wheels carry the library (on Linux it is the system's libportaudio2).

Nothing here opens a stream: listing asks PortAudio what exists, which opens no microphone (the privacy
test watches PulseAudio's source-outputs while listing). sounddevice is imported on first use, never at
import, because importing it starts PortAudio.
"""

from __future__ import annotations

import importlib
import re
import threading
from dataclasses import dataclass
from enum import StrEnum
from types import ModuleType
from typing import Any

from app.voice.mic_permission import host_error, refused_by_privacy


class DeviceProblem(StrEnum):
    """Why audio in or out could not start or went on no longer; each front end words it (device_words.py)."""

    NO_SOUND_LIBRARY = "no_sound_library"
    NO_MICROPHONE = "no_microphone"
    NO_SPEAKER = "no_speaker"
    PERMISSION_REFUSED = "permission_refused"
    DEVICE_BUSY = "device_busy"
    DEVICE_LOST = "device_lost"
    OPEN_FAILED = "open_failed"


class DeviceUnavailable(Exception):
    """A device could not be used: a problem plus facts (PortAudio's own words, for the log and the detail)."""

    def __init__(self, problem: DeviceProblem, detail: str = "") -> None:
        super().__init__(problem, detail)
        self.problem = problem
        self.detail = detail


@dataclass(frozen=True)
class AudioDevice:
    """One device as PortAudio lists it. name + host_api is what a setting keeps (indexes change when the
    list is read again); channels: inputs for a microphone, outputs for a speaker."""

    index: int
    name: str
    host_api: str
    channels: int
    default_rate: float
    is_default: bool


@dataclass(frozen=True)
class AudioDevices:
    """What the sound system offers: microphones and speakers, each list with its default marked."""

    inputs: tuple[AudioDevice, ...]
    outputs: tuple[AudioDevice, ...]

    @property
    def default_input(self) -> AudioDevice | None:
        return next((device for device in self.inputs if device.is_default), self.inputs[0] if self.inputs else None)

    @property
    def default_output(self) -> AudioDevice | None:
        return next((device for device in self.outputs if device.is_default), self.outputs[0] if self.outputs else None)


# PortAudio's device list is read once when it starts; reading it again restarts PortAudio, which would
# end any stream that is open, so a refresh waits until none is.
_library_lock = threading.Lock()
_open_streams = 0


def sound_library() -> Any:
    """The sounddevice module (PortAudio started by its import); DeviceUnavailable when it or PortAudio is missing."""
    try:
        module: ModuleType = importlib.import_module("sounddevice")
    except (ImportError, OSError) as exc:  # OSError: sounddevice is there but libportaudio is not
        raise DeviceUnavailable(DeviceProblem.NO_SOUND_LIBRARY, str(exc)) from exc
    return module


def stream_opened() -> None:
    """Called before a stream opens (and stream_closed() after it closes, or fails to open): no refresh
    restarts PortAudio under it."""
    global _open_streams
    with _library_lock:
        _open_streams += 1


def stream_closed() -> None:
    global _open_streams
    with _library_lock:
        _open_streams = max(0, _open_streams - 1)


def list_audio_devices(*, refresh: bool = True) -> AudioDevices:
    """Every microphone and speaker; refresh reads the list again (a device plugged in since), unless a stream is open."""
    sd = sound_library()
    with _library_lock:
        if refresh and _open_streams == 0:
            sd._terminate()  # sounddevice's documented way to see devices added since it started
            sd._initialize()
        devices = sd.query_devices()
        apis = sd.query_hostapis()
    default_in, default_out = _defaults(sd)
    inputs, outputs = [], []
    for raw in devices:
        host_api = apis[raw["hostapi"]]["name"]
        if raw["max_input_channels"] > 0:
            inputs.append(AudioDevice(raw["index"], raw["name"], host_api, raw["max_input_channels"],
                                      raw["default_samplerate"], raw["index"] == default_in))
        if raw["max_output_channels"] > 0:
            outputs.append(AudioDevice(raw["index"], raw["name"], host_api, raw["max_output_channels"],
                                       raw["default_samplerate"], raw["index"] == default_out))
    return AudioDevices(tuple(inputs), tuple(outputs))


def _defaults(sd: Any) -> tuple[int, int]:
    try:
        default_in, default_out = sd.default.device
    except (TypeError, ValueError):
        return -1, -1
    return int(default_in if default_in is not None else -1), int(default_out if default_out is not None else -1)


def find_device(devices: tuple[AudioDevice, ...], name: str | None, *, microphone: bool) -> AudioDevice:
    """The device a setting names (None: the default), or DeviceUnavailable when there is none to use."""
    missing = DeviceProblem.NO_MICROPHONE if microphone else DeviceProblem.NO_SPEAKER
    if not devices:
        raise DeviceUnavailable(missing)
    if name is None:
        return next((device for device in devices if device.is_default), devices[0])
    for device in devices:
        if device.name == name:
            return device
    raise DeviceUnavailable(missing, name)


def pick_device(name: str | None, *, microphone: bool) -> AudioDevice:
    """find_device over the list PortAudio already has, read again only when that misses (a device plugged
    in since): restarting PortAudio for every sentence read aloud would cost each one its start-up."""
    for refresh in (False, True):
        devices = list_audio_devices(refresh=refresh)
        try:
            return find_device(devices.inputs if microphone else devices.outputs, name, microphone=microphone)
        except DeviceUnavailable:
            if refresh:
                raise
    raise AssertionError("unreachable")


# ALSA's answers (negative errno) when a device is not there, and when another program holds it.
_GONE_ERRNOS = {-2, -5, -6, -19}  # ENOENT, EIO (PulseAudio's plugin with no source), ENXIO, ENODEV
_BUSY_ERRNOS = {-16}  # EBUSY
_DENIED_ERRNOS = {-1, -13}  # EPERM, EACCES
# PortAudio's own codes: paInvalidDevice, paDeviceUnavailable.
_GONE_CODES = {-9996, -9985}
_PA_CODE = re.compile(r"\[PaErrorCode (?P<code>-?\d+)\]")


def problem_of(error_text: str, *, microphone: bool, platform: str) -> DeviceUnavailable:
    """PortAudio's words for a stream that would not open (str() of sounddevice's PortAudioError), as a
    problem the person can act on."""
    if refused_by_privacy(error_text, platform):
        return DeviceUnavailable(DeviceProblem.PERMISSION_REFUSED, error_text)
    found = _PA_CODE.search(error_text)
    code = int(found.group("code")) if found else 0
    host = host_error(error_text)
    host_code = host[1] if host is not None and host[0] == "ALSA" else 0
    if host_code in _DENIED_ERRNOS:
        return DeviceUnavailable(DeviceProblem.PERMISSION_REFUSED, error_text)
    if host_code in _BUSY_ERRNOS:
        return DeviceUnavailable(DeviceProblem.DEVICE_BUSY, error_text)
    if code in _GONE_CODES or host_code in _GONE_ERRNOS:
        return DeviceUnavailable(DeviceProblem.NO_MICROPHONE if microphone else DeviceProblem.NO_SPEAKER, error_text)
    return DeviceUnavailable(DeviceProblem.OPEN_FAILED, error_text)
