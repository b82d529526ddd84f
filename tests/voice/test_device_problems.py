"""PortAudio's errors as problems in words (recorded errors, each with its source), the level meter's numbers, and the resampler's seams."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from app.voice.device_words import device_words
from app.voice.devices import DeviceProblem, DeviceUnavailable, problem_of
from app.voice.mic_permission import host_error, refused_by_privacy, windows_consent_denied
from app.voice.microphone import FLOOR_DBFS, MicrophoneSession, level_of
from app.voice.resampling import StreamResampler

# Windows with "Let desktop apps access your microphone" off, through MME (sounddevice's default there):
# the title of python-sounddevice issue #233 (2020-04), whose fix was that privacy setting.
WINDOWS_PRIVACY_MME = ("Error opening InputStream: Unanticipated host error [PaErrorCode -9999]: "
                       "'Undefined external error.' [MME error 1]")
# The same setting through WASAPI: IAudioClient::Initialize's E_ACCESSDENIED, -2147024891 (0x80070005), as
# FlexASIO issues #61/#133 and fmedia issue #71 recorded it; the sentence around the code is sounddevice's
# own format (PortAudioError.__str__), not a recorded line.
WINDOWS_PRIVACY_WASAPI = ("Error opening InputStream: Unanticipated host error [PaErrorCode -9999]: "
                          "'Access is denied.' [Windows WASAPI error -2147024891]")
# Windows, a device that will not open for another reason: python-sounddevice issue #161 (privacy allowed there).
WINDOWS_INVALID_PARAMETER = ("Error opening InputStream: Unanticipated host error [PaErrorCode -9999]: "
                             "'An invalid parameter was passed to a system function.' [MME error 11]")
# Linux, recorded here: str() of the PortAudioError from opening ALSA's pulse device on a PulseAudio server
# with no source (tests/voice/test_audio_devices.py::test_no_microphone_ends_in_words makes the same).
LINUX_PULSE_NO_SOURCE = ("Error opening InputStream: Unanticipated host error [PaErrorCode -9999]: "
                         "'Input/output error' [ALSA error -5]")
# PortAudio issue #293 (Windows 10, the privacy setting again, through sounddevice): a PortAudio code, no host error.
DEVICE_UNAVAILABLE = "Error opening RawStream: Device unavailable [PaErrorCode -9985]"


def test_windows_privacy_is_recognised_from_what_people_recorded() -> None:
    assert refused_by_privacy(WINDOWS_PRIVACY_WASAPI, "win32")
    assert refused_by_privacy(WINDOWS_PRIVACY_MME, "win32", consent_denied=True)
    assert refused_by_privacy(WINDOWS_PRIVACY_MME, "win32", consent_denied=None)  # the store unread: likeliest cause
    assert not refused_by_privacy(WINDOWS_PRIVACY_MME, "win32", consent_denied=False)
    assert not refused_by_privacy(WINDOWS_INVALID_PARAMETER, "win32", consent_denied=True)
    assert not refused_by_privacy(WINDOWS_PRIVACY_WASAPI, "linux")  # the check is Windows' only


def test_the_windows_consent_store_is_not_read_elsewhere() -> None:
    if sys.platform == "win32":
        pytest.skip("reads the real consent store on Windows")
    assert windows_consent_denied() is None


def test_host_errors_are_read_from_portaudios_words() -> None:
    assert host_error(WINDOWS_PRIVACY_MME) == ("MME", 1)
    assert host_error(LINUX_PULSE_NO_SOURCE) == ("ALSA", -5)
    assert host_error(DEVICE_UNAVAILABLE) is None


@pytest.mark.parametrize(("text", "platform", "microphone", "problem"), [
    (WINDOWS_PRIVACY_WASAPI, "win32", True, DeviceProblem.PERMISSION_REFUSED),
    (LINUX_PULSE_NO_SOURCE, "linux", True, DeviceProblem.NO_MICROPHONE),
    (LINUX_PULSE_NO_SOURCE, "linux", False, DeviceProblem.NO_SPEAKER),
    (DEVICE_UNAVAILABLE, "linux", True, DeviceProblem.NO_MICROPHONE),
    (WINDOWS_INVALID_PARAMETER, "win32", True, DeviceProblem.OPEN_FAILED),
])
def test_opening_errors_become_problems(text: str, platform: str, microphone: bool, problem: DeviceProblem) -> None:
    unavailable = problem_of(text, microphone=microphone, platform=platform)
    assert unavailable.problem is problem and unavailable.detail == text


def test_each_problem_is_said_with_what_to_do() -> None:
    refused = problem_of(WINDOWS_PRIVACY_WASAPI, microphone=True, platform="win32")
    assert "Privacy & security → Microphone" in device_words(refused, "win32")
    assert "System Settings → Privacy & Security" in device_words(refused, "darwin")
    failed = problem_of(WINDOWS_INVALID_PARAMETER, microphone=True, platform="win32")
    assert "An invalid parameter" in device_words(failed, "win32")
    for problem in DeviceProblem:
        said = device_words(DeviceUnavailable(problem))
        assert said.endswith(".") and "{" not in said and "Traceback" not in said


def test_the_level_is_in_dbfs() -> None:
    assert level_of(np.zeros(512, np.int16)) == level_of(np.zeros(0, np.int16))
    assert level_of(np.zeros(512, np.int16)).rms_dbfs == FLOOR_DBFS
    full = np.where(np.arange(512) % 2 == 0, 32767, -32768).astype(np.int16)
    assert level_of(full).peak_dbfs == pytest.approx(0.0, abs=0.01)
    sine = (np.sin(np.arange(16000) * 2 * np.pi * 440 / 16000) * 16384).astype(np.int16)
    level = level_of(sine)
    assert level.peak_dbfs == pytest.approx(-6.02, abs=0.05)
    assert level.rms_dbfs == pytest.approx(-9.03, abs=0.05)  # a sine's rms is 3 dB under its peak


@pytest.mark.parametrize(("rate", "block"), [(48_000, 1536), (44_100, 1411), (16_000, 512), (22_050, 700)])
def test_resampling_block_by_block_matches_the_whole(rate: int, block: int) -> None:
    """Converted in blocks as a device delivers them, the result is the one-shot interpolation: no seams."""
    signal = (np.sin(np.arange(rate) * 2 * np.pi * 440 / rate) * 10000).astype(np.int16)
    resampler = StreamResampler(rate, 16_000)
    out = np.concatenate([resampler.convert(signal[at:at + block]) for at in range(0, signal.size, block)])
    whole = np.interp(np.arange(out.size) * rate / 16_000, np.arange(signal.size), signal.astype(np.float64))
    assert out.size == pytest.approx(16_000, abs=2)
    assert np.abs(out - whole).max() <= 1


def test_without_the_sound_library_the_microphone_is_refused_in_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sounddevice", None)  # import sounddevice now fails, as where it is not installed
    mic = MicrophoneSession()
    with pytest.raises(DeviceUnavailable) as refused:
        mic.start()
    assert refused.value.problem is DeviceProblem.NO_SOUND_LIBRARY and not mic.open
    assert "PortAudio library is missing" in device_words(refused.value)
