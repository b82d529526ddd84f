"""The microphone, playback and dictation through a real sound server: a private PulseAudio whose null sink's monitor is the microphone."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from app.voice.audio import SAMPLE_RATE, AudioKind, decode
from app.voice.device_words import device_words
from app.voice.devices import DeviceProblem, DeviceUnavailable, list_audio_devices
from app.voice.dictation import DictationEvent, DictationPipeline, DictationSettings, Heard
from app.voice.microphone import FLOOR_DBFS, MicrophoneEnded, MicrophoneSession
from app.voice.playback import Playback, PlaybackEnd
from app.voice.protocol import TranscribeAsk
from app.voice.transcriber import Transcriber
from app.voice.vad import SpeechStarted, VoiceActivity
from tests.helpers.pulse import ALSA_PULSE_DEVICE, PulseServer
from tests.helpers.speech import BECKETT, BECKETT_SAID, similarity, words

ROOT = Path(__file__).resolve().parents[2]


def beckett_pcm() -> np.ndarray:
    return (decode(BECKETT.read_bytes(), AudioKind.FILE) * 32767).astype(np.int16)


def record_until_ended(mic: MicrophoneSession, seconds: float) -> tuple[np.ndarray, MicrophoneEnded]:
    """Every block for about seconds (then stop()), and how the session ended; bounded however it goes."""
    blocks: list[np.ndarray] = []
    stop_at = time.monotonic() + seconds
    give_up = stop_at + 15
    while time.monotonic() < give_up:
        if time.monotonic() >= stop_at:
            mic.stop()
        got = mic.read(0.1)
        if isinstance(got, MicrophoneEnded):
            return (np.concatenate(blocks) if blocks else np.zeros(0, np.int16)), got
        if got is not None:
            blocks.append(got)
    raise AssertionError("the microphone session never ended")


def test_devices_are_listed_with_defaults(pulse: PulseServer) -> None:
    devices = list_audio_devices()
    assert ALSA_PULSE_DEVICE in [device.name for device in devices.inputs]
    assert ALSA_PULSE_DEVICE in [device.name for device in devices.outputs]
    assert devices.default_input is not None and devices.default_output is not None
    assert sum(device.is_default for device in devices.inputs) <= 1


def test_listing_devices_opens_no_microphone(pulse: PulseServer) -> None:
    """Importing every voice module and listing devices, in a fresh process, makes no recording stream on
    the server (pactl subscribe sees every one made); starting a session does, as the control."""
    script = (
        "import sys, time\n"
        "import app.voice.devices, app.voice.microphone, app.voice.dictation, app.voice.playback\n"
        "assert 'sounddevice' not in sys.modules, 'PortAudio started at import'\n"
        "from app.voice.devices import list_audio_devices\n"
        "devices = list_audio_devices(); list_audio_devices()\n"
        "print('listed', len(devices.inputs), flush=True)\n"
        "sys.stdin.readline()\n"
        "mic = app.voice.microphone.MicrophoneSession('pulse'); mic.start()\n"
        "while mic.read(0.1) is None: pass\n"
        "print('recording', flush=True); sys.stdin.readline(); mic.stop()\n")
    watcher = pulse.subscribe()
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(iter(watcher.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    time.sleep(0.5)  # pactl subscribe is listening before the client starts
    child = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().startswith("listed")
        time.sleep(1.0)  # what the server says reaches pactl subscribe
        while_listing = list(seen)
        assert any("on client" in line for line in while_listing)  # the watcher does see this client
        assert not [line for line in while_listing if "source-output" in line], while_listing
        assert pulse.source_outputs() == []
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline().startswith("recording")
        assert len(pulse.source_outputs()) == 1  # the control: a started session is seen
        child.stdin.write("\n")
        child.stdin.flush()
        child.wait(20)
    finally:
        child.kill()
        child.communicate(timeout=10)  # closes its pipes
        watcher.terminate()
        reader.join(10)
        watcher.wait(10)
        if watcher.stdout is not None:
            watcher.stdout.close()


def test_speech_played_into_the_speaker_is_recorded_at_the_devices_own_rate(
        pulse: PulseServer, tiny_transcriber: Transcriber) -> None:
    """paplay (PulseAudio's own player) into the null sink; the session records its monitor at 44.1 kHz
    and hands 16 kHz blocks on, which the transcriber hears as the recording's words."""
    mic = MicrophoneSession(ALSA_PULSE_DEVICE, capture_rate=44_100)
    mic.start()
    player = subprocess.Popen(["paplay", f"--server={pulse.address}", str(BECKETT)])
    try:
        recorded, ended = record_until_ended(mic, 12.0)
    finally:
        player.kill()
        player.wait(10)
    assert ended.problem is None
    assert recorded.size == pytest.approx(12.0 * SAMPLE_RATE, rel=0.2)
    transcript = tiny_transcriber.transcribe(TranscribeAsk(recorded.astype("<i2").tobytes(), AudioKind.PCM16))
    assert similarity(transcript.text, BECKETT_SAID) >= 0.8, transcript.text


def test_dictation_hears_speech_played_through_the_sound_server(
        pulse: PulseServer, tiny_transcriber: Transcriber) -> None:
    """Kestrel's playback into the speaker, its microphone session on the monitor, voice activity, the
    transcriber: each utterance's text as it ends, the whole recording's words at the end. The pipeline is
    not told what Kestrel plays (spoken=None), so the playback stands for a person in the room."""
    events: list[DictationEvent] = []
    levels: list[float] = []
    mic = MicrophoneSession(ALSA_PULSE_DEVICE)
    pipeline = DictationPipeline(mic, tiny_transcriber, VoiceActivity(), events.append, spoken=None)
    pipeline.start()
    player = Playback(ALSA_PULSE_DEVICE)
    player.play(beckett_pcm(), SAMPLE_RATE)
    finished = None
    for _ in range(300):  # up to 15 s for 10 s of speech
        levels.append(mic.level.peak_dbfs)
        finished = player.wait(0.05)
        if finished is not None:
            break
    assert finished is not None and finished.how is PlaybackEnd.FINISHED
    time.sleep(1.5)  # the last words' hang-over
    silent = mic.level
    pipeline.stop()
    result = pipeline.wait(60)
    assert result is not None and result.problem is None
    assert similarity(result.text, BECKETT_SAID) >= 0.7, result.text
    heard = [event for event in events if isinstance(event, Heard)]
    assert len(heard) >= 2 and heard == list(result.heard)  # told as each utterance ended, not only at the end
    assert any(isinstance(event, SpeechStarted) for event in events)
    assert max(levels) > -30 and silent.peak_dbfs == FLOOR_DBFS  # the meter moved with the speech, then fell


def test_dictation_does_not_take_kestrels_own_voice_for_speech(pulse: PulseServer,
                                                               tiny_transcriber: Transcriber) -> None:
    """The microphone is the speaker's monitor, as a laptop's microphone hears its loudspeakers: what Kestrel
    plays is known for its own (app/voice/echo.py) and neither told nor transcribed."""
    events: list[DictationEvent] = []
    mic = MicrophoneSession(ALSA_PULSE_DEVICE)
    pipeline = DictationPipeline(mic, tiny_transcriber, VoiceActivity(), events.append)
    pipeline.start()
    player = Playback(ALSA_PULSE_DEVICE)
    player.play(beckett_pcm()[:SAMPLE_RATE * 5], SAMPLE_RATE)
    finished, levels = None, []
    for _ in range(200):
        levels.append(mic.level.peak_dbfs)
        finished = player.wait(0.05)
        if finished is not None:
            break
    assert finished is not None and finished.how is PlaybackEnd.FINISHED
    time.sleep(1.0)
    pipeline.stop()
    result = pipeline.wait(60)
    assert result is not None and result.problem is None
    assert max(levels) > -30  # the microphone heard the voice (the test above transcribes the same playback)
    assert result.text == "" and events == [result], events


def test_dictation_ends_by_itself_after_one_utterance_and_cuts_long_speech(
        pulse: PulseServer, tiny_transcriber: Transcriber) -> None:
    """one_utterance: it stops at the end of the first speech, without a stop(); an utterance longer than
    max_utterance_s is sent in parts (cut), so a person who never pauses still sees words."""
    events: list[DictationEvent] = []
    settings = DictationSettings(one_utterance=True, max_utterance_s=0.8)
    pipeline = DictationPipeline(MicrophoneSession(ALSA_PULSE_DEVICE), tiny_transcriber, VoiceActivity(),
                                 events.append, settings)
    pipeline.start()
    player = subprocess.Popen(["paplay", f"--server={pulse.address}", str(BECKETT)])
    try:
        result = pipeline.wait(60)
    finally:
        player.kill()
        player.wait(10)
        pipeline.stop()
    assert result is not None and result.problem is None
    assert result.heard and result.heard[0].cut  # the first speech ran past 0.8 s
    # and it stopped at that speech's end, not at the end of the recording ("... Fail better." at 9 s)
    assert result.heard[-1].end < 8.0 and "better" not in words(result.text), result.text


def test_no_microphone_ends_in_words(pulse_without_devices: PulseServer, tiny_transcriber: Transcriber) -> None:
    mic = MicrophoneSession()
    with pytest.raises(DeviceUnavailable) as refused:
        DictationPipeline(mic, tiny_transcriber, VoiceActivity(), lambda event: None).start()
    assert refused.value.problem is DeviceProblem.NO_MICROPHONE
    assert device_words(refused.value) == ("No microphone was found: plug one in or choose one in "
                                           "Settings → Voice.")
    assert not mic.open and pulse_without_devices.source_outputs() == []


def test_a_device_that_is_not_there_is_said(pulse: PulseServer) -> None:
    with pytest.raises(DeviceUnavailable) as no_mic:
        MicrophoneSession("Headset that was unplugged").start()
    assert no_mic.value.problem is DeviceProblem.NO_MICROPHONE
    with pytest.raises(DeviceUnavailable) as no_speaker:
        Playback("Speakers that were unplugged").play(np.zeros(1600, np.int16), SAMPLE_RATE)
    assert no_speaker.value.problem is DeviceProblem.NO_SPEAKER
    assert "choose an output in Settings → Voice" in device_words(no_speaker.value)


def test_a_microphone_unplugged_mid_dictation_ends_in_words_keeping_what_was_heard(
        pulse: PulseServer, tiny_transcriber: Transcriber) -> None:
    events: list[DictationEvent] = []
    pipeline = DictationPipeline(MicrophoneSession(ALSA_PULSE_DEVICE), tiny_transcriber, VoiceActivity(),
                                 events.append)
    pipeline.start()
    player = subprocess.Popen(["paplay", f"--server={pulse.address}", str(BECKETT)])
    try:
        time.sleep(6.0)  # "Ever tried. Ever failed. No matter." have been said
        pulse.unload_null_sink()
        result = pipeline.wait(60)
    finally:
        player.kill()
        player.wait(10)
    assert result is not None, "dictation did not end when its microphone went"
    assert result.problem is DeviceProblem.DEVICE_LOST
    assert "unplugged" in device_words(DeviceUnavailable(result.problem, result.detail))
    assert {"ever", "tried"} <= set(words(result.text)), result.text
    assert events[-1] == result


def test_playback_stops_at_once(pulse: PulseServer) -> None:
    """A 20 s tone stopped once the monitor hears it: the monitor goes silent and stays so, the tone not played out."""
    mic = MicrophoneSession(ALSA_PULSE_DEVICE)
    mic.start()
    blocks: list[np.ndarray] = []
    while not blocks:  # the device is recording before the tone starts (bounded: the session ends by itself)
        got = mic.read(0.1)
        assert not isinstance(got, MicrophoneEnded), got
        if got is not None:
            blocks.append(got)
    tone = (np.sin(np.arange(20 * SAMPLE_RATE) * 2 * np.pi * 440 / SAMPLE_RATE) * 12000).astype(np.int16)
    player = Playback(ALSA_PULSE_DEVICE)
    player.play(tone, SAMPLE_RATE)
    stopped_at: int | None = None
    give_up = time.monotonic() + 15
    while time.monotonic() < give_up and (stopped_at is None or sum(map(len, blocks)) < stopped_at + 2 * SAMPLE_RATE):
        got = mic.read(0.1)
        assert not isinstance(got, MicrophoneEnded), got
        if got is not None:
            blocks.append(got)
        if stopped_at is None and sum(np.abs(block).max() > 6000 for block in blocks) >= 10:
            ended = player.stop()
            assert ended is not None and ended.how is PlaybackEnd.STOPPED
            assert 0 < ended.played_samples < tone.size // 2
            stopped_at = sum(map(len, blocks))
    mic.stop()
    assert stopped_at is not None, "the tone was never heard"
    recorded = np.concatenate(blocks)
    tail = recorded[stopped_at + SAMPLE_RATE // 2:]
    assert tail.size >= SAMPLE_RATE and np.abs(tail).max() < 100, "the tone went on after stop()"
    assert not player.playing and player.wait(0.1) is not None


def test_a_speaker_unplugged_mid_sound_ends_it_in_words(pulse: PulseServer) -> None:
    player = Playback(ALSA_PULSE_DEVICE)
    player.play(np.zeros(20 * SAMPLE_RATE, np.int16), SAMPLE_RATE)
    assert player.wait(1.0) is None and player.playing
    pulse.unload_null_sink()
    ended = player.wait(10)
    assert ended is not None and ended.how is PlaybackEnd.DEVICE_LOST
    assert 0 < ended.played_samples < 20 * SAMPLE_RATE
