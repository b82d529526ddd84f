"""Kestrel's own voice told from the person's (app/voice/echo.py): the likeness measure through made-up rooms,
the record of what was played, and the dictation pipeline on a microphone that hears both.

Kestrel's voice here is the first half of beckett.wav ("Ever tried. Ever failed. No matter."), the person
the second half ("Try again. Fail again. Fail better."): the same speaker, so the check cannot lean on a
difference of voices. A room is an impulse response: the direct sound, then decaying noise as
reverberation of the given length, at the given direct-to-reverberant ratio.
"""

from __future__ import annotations

import queue
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pytest

from app.voice.audio import SAMPLE_RATE, AudioKind, decode
from app.voice.dictation import DictationEvent, DictationPipeline, DictationSettings, Heard
from app.voice.echo import ECHO_AT, MAX_DELAY_S, MAX_EARLY_S, PERSON_BELOW, WINDOW_S, EchoCheck, SpokenSound, Whose, echo_likeness
from app.voice.microphone import BLOCK_SAMPLES, MicrophoneEnded
from app.voice.transcriber import Transcriber
from app.voice.vad import SpeechStarted, VoiceActivity
from tests.helpers.speech import BECKETT, words

FS = SAMPLE_RATE
ROOMS = [(0.05, 20.0), (0.3, 6.0), (0.5, 0.0)]  # (reverberation s, direct to reverberant dB)
START = 1000.0  # the monotonic time of the scripted microphone's first sample


def beckett() -> npt.NDArray[np.float64]:
    return decode(BECKETT.read_bytes(), AudioKind.FILE).astype(np.float64) * 32767


def kestrel_and_person() -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    speech = beckett()
    return speech[:round(4.5 * FS)], speech[round(5.2 * FS):]


def room(reverberation_s: float, direct_to_reverberant_db: float, seed: int = 7) -> npt.NDArray[np.float64]:
    rng = np.random.default_rng(seed)
    times = np.arange(round(reverberation_s * FS)) / FS
    tail = rng.standard_normal(times.size) * np.exp(-times * 6.9 / reverberation_s)
    tail[:round(0.003 * FS)] = 0.0
    tail *= np.sqrt(10 ** (-direct_to_reverberant_db / 10) / (tail @ tail))
    tail[0] = 1.0
    return tail


def through(sound: npt.NDArray[np.float64], response: npt.NDArray[np.float64], delay_s: float,
            gain: float) -> npt.NDArray[np.float64]:
    return np.convolve(np.concatenate([np.zeros(round(delay_s * FS)), sound]), response)[:round(delay_s * FS)
                                                                                          + sound.size] * gain


def loud_windows(sound: npt.NDArray[np.float64], step_s: float = 0.2) -> list[int]:
    """The ends of the WINDOW_S stretches of sound in which it speaks (rms within 12 dB of its loudest; the
    quieter ones are the pauses, where the room's noise is most of what the microphone hears)."""
    size = round(WINDOW_S * FS)
    ends = list(range(size, sound.size + 1, round(step_s * FS)))
    rms = np.array([np.sqrt(np.mean(sound[end - size:end] ** 2)) for end in ends])
    return [end for end, value in zip(ends, rms) if value >= rms.max() / 4]


def likeness_at(mic: npt.NDArray[np.float64], reference: npt.NDArray[np.float64], end: int) -> float:
    """The likeness of the microphone's window ending at sample end to the reference as EchoCheck cuts it
    (reference[i] sounded when the microphone heard mic[i])."""
    size, lag = round(WINDOW_S * FS), round(MAX_DELAY_S * FS)
    early = round(MAX_EARLY_S * FS)
    padded = np.concatenate([np.zeros(lag + size), reference, np.zeros(max(0, mic.size - reference.size) + early)])
    return echo_likeness(mic[end - size:end], padded[end:end + lag + size + early])  # end - size - lag to end + early


@pytest.mark.parametrize("reverberation_s,direct_db", ROOMS)
def test_kestrels_voice_through_a_room_is_echo_and_a_person_alone_is_not(reverberation_s: float,
                                                                          direct_db: float) -> None:
    kestrel, person = kestrel_and_person()
    rng = np.random.default_rng(1)
    echo = through(kestrel, room(reverberation_s, direct_db), 0.12, 0.4)
    echo += rng.standard_normal(echo.size) * 20
    spoken = [likeness_at(echo, kestrel, end) for end in loud_windows(echo) if end > round(0.6 * FS)]
    assert spoken and min(spoken) >= ECHO_AT, spoken
    alone = person[:kestrel.size] + rng.standard_normal(kestrel.size) * 20
    others = [likeness_at(alone, kestrel, end) for end in loud_windows(alone)]
    assert others and max(others) < PERSON_BELOW, others


def test_a_person_louder_than_the_echo_is_not_echo() -> None:
    """The person near the microphone, 10 dB above Kestrel's voice coming back from the speaker."""
    kestrel, person = kestrel_and_person()
    echo = through(kestrel, room(0.3, 6.0), 0.12, 0.3)
    both = echo + person[:echo.size] * 0.3 * np.sqrt(10)
    told = [likeness_at(both, kestrel, end) for end in loud_windows(person[:echo.size])]
    assert told and np.median(told) < PERSON_BELOW, told


def test_the_record_places_each_stream_in_time_at_16_khz() -> None:
    now = [START]
    spoken = SpokenSound(clock=lambda: now[0])
    stream = spoken.begin(22_050)
    tone = (np.sin(np.arange(22_050) * 2 * np.pi * 440 / 22_050) * 10_000).astype(np.int16)
    for number, block in enumerate(np.split(tone, 10)):  # the first three asked for at once, to fill buffers:
        stream.played(block, START + (0.0 if number < 3 else 0.5 + number / 10))  # the newest block places them
    assert spoken.played_since(START + 1.4) and not spoken.played_since(START + 1.6)
    sound = spoken.between(START, START + 2.0)
    assert sound.size == 2 * FS
    assert not sound[:round(0.5 * FS) - 1].any() and not sound[round(1.5 * FS) + 1:].any()
    expected = np.sin(np.arange(FS) * 2 * np.pi * 440 / FS) * 10_000
    assert np.max(np.abs(sound[round(0.5 * FS):round(1.5 * FS)] - expected)) < 700  # linear interpolation's error
    now[0] = START + 5.0  # three seconds after it ended: forgotten
    spoken.begin(16_000).played(np.ones(160, np.int16), START + 5.0)
    assert not spoken.between(START, START + 2.0).any()


def test_nothing_played_means_no_echo_check() -> None:
    check = EchoCheck(SpokenSound(clock=lambda: START), lambda sample: START + sample / FS)
    assert check.heard(np.full(FS, 1000, np.int16), FS) is Whose.NOTHING_PLAYED


# --- the dictation pipeline on a scripted microphone ----------------------------------------------------------

@dataclass
class ScriptedMicrophone:
    """A microphone that hears the given samples, block by block, as fast as they are read."""

    sound: npt.NDArray[np.int16]

    def __post_init__(self) -> None:
        self._blocks: queue.SimpleQueue[npt.NDArray[np.int16]] = queue.SimpleQueue()
        for at in range(0, self.sound.size - BLOCK_SAMPLES + 1, BLOCK_SAMPLES):
            self._blocks.put(self.sound[at:at + BLOCK_SAMPLES])
        self.stopped = False
        self.read_samples = 0  # how far the pipeline had listened when it ended

    def start(self) -> None:
        pass

    def read(self, timeout: float) -> npt.NDArray[np.int16] | MicrophoneEnded:
        if self.stopped:
            return MicrophoneEnded()
        try:
            block = self._blocks.get_nowait()
        except queue.Empty:
            return MicrophoneEnded()
        self.read_samples += block.size
        return block

    def stop(self) -> None:
        self.stopped = True

    def heard_at(self, sample: int) -> float:
        return START + sample / FS


def kestrel_speaking(kestrel: npt.NDArray[np.float64], at_s: float) -> SpokenSound:
    """The record of Kestrel's voice sounding from at_s on the microphone's timeline (one 16 kHz stream)."""
    spoken = SpokenSound(clock=lambda: START + at_s)
    spoken.begin(FS).played(np.clip(kestrel, -32768, 32767).astype(np.int16), START + at_s)
    return spoken


def dictate(sound: npt.NDArray[np.float64], spoken: SpokenSound | None,
            transcriber: Transcriber) -> tuple[list[DictationEvent], str]:
    events: list[DictationEvent] = []
    mic = ScriptedMicrophone(np.clip(sound, -32768, 32767).astype(np.int16))
    pipeline = DictationPipeline(mic, transcriber, VoiceActivity(), events.append,  # type: ignore[arg-type]
                                 DictationSettings(), spoken=spoken)
    pipeline.start()
    result = pipeline.wait(60)
    assert result is not None and result.problem is None
    assert events[-1] == result
    return events[:-1], result.text


def test_dictation_drops_kestrels_own_voice_and_hears_the_person_over_it(tiny_transcriber: Transcriber) -> None:
    kestrel, person = kestrel_and_person()
    lead = np.zeros(FS // 2)
    echo = through(kestrel, room(0.3, 6.0), 0.12, 0.4)
    rng = np.random.default_rng(3)
    mic_echo = np.concatenate([lead, echo, np.zeros(FS)]) + rng.standard_normal(lead.size + echo.size + FS) * 20

    # The control: without the record of what was played, Kestrel's voice is taken for speech.
    events, text = dictate(mic_echo, None, tiny_transcriber)
    assert any(isinstance(event, SpeechStarted) for event in events) and {"tried", "failed"} & set(words(text)), text

    events, text = dictate(mic_echo, kestrel_speaking(kestrel, 0.5), tiny_transcriber)
    assert events == [] and text == ""

    # The person starts to speak 1.5 s into Kestrel's voice, 10 dB above its echo; the voice stops 0.3 s
    # later (as voice mode stops it when told the person speaks), and the person goes on.
    over, stop = round(2.0 * FS), round(2.3 * FS)
    cut = kestrel[:stop - FS // 2]
    echo = through(cut, room(0.3, 6.0), 0.12, 0.4)
    mic_both = np.zeros(over + person.size + FS)
    mic_both[FS // 2:FS // 2 + echo.size] += echo
    mic_both[over:over + person.size] += person * 0.4 * np.sqrt(10)
    mic_both += rng.standard_normal(mic_both.size) * 20
    events, text = dictate(mic_both, kestrel_speaking(cut, 0.5), tiny_transcriber)
    started = [event for event in events if isinstance(event, SpeechStarted)]
    assert started and 1.5 <= started[0].at <= 2.2, started
    assert {"fail", "again", "better"} <= set(words(text)), text
    assert "tried" not in words(text), text  # Kestrel's "Ever tried." before the person spoke: dropped
    assert all(isinstance(event, (SpeechStarted, Heard)) for event in events)
