"""Kestrel's own voice, told from the person's: what the speaker played, and whether the microphone hears it.

With loudspeakers instead of headphones the microphone hears Kestrel speak. Voice mode keeps the
microphone open while it answers (so that the person can interrupt by speaking), and without this the
voice activity detector would take Kestrel's voice for the person's: Kestrel would interrupt itself and
send its own words back as the next message.

This is an echo check, not an echo canceller: it does not clean the person's voice out of the echo, it
says whether what the detector calls speech is only Kestrel's voice coming back. Every block Kestrel plays
is kept here for a few seconds with the time it sounds (SPOKEN, written from PortAudio's output callback);
the dictation pipeline compares the microphone's last 0.4 s with what was played from 1.0 s before to 0.3 s
after
(normalized cross-correlation, after a first difference that whitens speech so that two different voices
do not correlate through their low tones). Measured on beckett.wav through made-up rooms (reverberation
0.05 to 0.6 s, direct to reverberant from +20 to 0 dB): the echo alone correlates at 0.5 to 1.0, a person
alone at 0.1 or less, a person speaking over the echo at 0.05 to 0.6 depending on how much louder they
are. So: 0.35 or more is the echo; under 0.2, the person. A person who speaks over a loud echo may go
unheard until the voice pauses; then Esc (or the button) stops it. The delay between a block written here
and heard there is found by the search, so the two devices' times only need to be on the same monotonic
clock and within MAX_EARLY_S / MAX_DELAY_S of the truth.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from app.voice.audio import SAMPLE_RATE

# How far back the reference is searched: the output's latency plus the input's (tens of ms on
# PulseAudio and Windows' shared mode, a few hundred on Bluetooth speakers), plus the room.
MAX_DELAY_S = 1.0
# How much earlier than the times say the microphone may hear a sound: the two devices' times are guesses
# (a callback's time less the latency PortAudio reports, which the sound server's buffering exceeds; through
# PulseAudio here the microphone heard the voice 0.1 s before the time its blocks were written for).
MAX_EARLY_S = 0.3
# The microphone's stretch compared: long enough for a few syllables, short enough to follow a barge-in.
WINDOW_S = 0.4
ECHO_AT = 0.35  # at or above: the microphone hears Kestrel's voice
PERSON_BELOW = 0.2  # under: something that is not Kestrel's voice (the person)
# What is kept of the played sound: the longest stretch a check needs, with room to spare.
_KEEP_S = 3.0


class Whose(StrEnum):
    """Whose voice the microphone hears."""

    NOTHING_PLAYED = "nothing_played"  # the speaker was silent: whatever the microphone hears is not an echo
    ECHO = "echo"
    PERSON = "person"
    UNSURE = "unsure"


@dataclass
class _Stretch:
    """One playback stream's samples: sample i sounds at start + i / rate, placed by its newest block (a
    stream's first blocks are asked for at once to fill the buffers, and a sound server may take a second
    or two to start playing them: measured through PulseAudio here, 1.9 s)."""

    rate: int
    samples: list[npt.NDArray[np.int16]]
    count: int = 0
    start: float = 0.0

    @property
    def end(self) -> float:
        return self.start + self.count / self.rate


class SpokenSound:
    """What this process played through the speaker lately, each sample with the time it sounded."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._stretches: list[_Stretch] = []

    def begin(self, rate: int) -> SpokenStream:
        """A new playback stream at rate; its blocks follow one another without gaps."""
        return SpokenStream(self, rate)

    def _played(self, stream: SpokenStream, block: npt.NDArray[np.int16], sounds_at: float) -> None:
        with self._lock:
            stretch = stream._stretch
            if stretch is None:
                stretch = stream._stretch = _Stretch(stream.rate, [])
                self._stretches.append(stretch)
            stretch.start = sounds_at - stretch.count / stretch.rate
            stretch.samples.append(block)
            stretch.count += block.size
            horizon = self._clock() - _KEEP_S
            self._stretches = [kept for kept in self._stretches if kept.end >= horizon]

    def played_since(self, moment: float) -> bool:
        """Whether anything sounded (or was queued to sound) at or after moment."""
        with self._lock:
            return any(stretch.end >= moment and stretch.count for stretch in self._stretches)

    def between(self, start: float, end: float) -> npt.NDArray[np.float64]:
        """What sounded from start to end, at 16 kHz (silence where nothing played)."""
        count = max(0, round((end - start) * SAMPLE_RATE))
        out = np.zeros(count)
        with self._lock:  # only the lists are copied under the lock: the audio callback waits on it
            stretches = [(stretch.start, stretch.rate, list(stretch.samples))
                         for stretch in self._stretches if stretch.end > start and stretch.start < end]
        times = start + np.arange(count) / SAMPLE_RATE
        for first, rate, blocks in stretches:
            if not blocks:
                continue
            samples = np.concatenate(blocks)
            inside = (times >= first) & (times < first + samples.size / rate)
            if inside.any():
                places = (times[inside] - first) * rate
                out[inside] += np.interp(places, np.arange(samples.size), samples.astype(np.float64))
        return out


class SpokenStream:
    """One playback's writer (from PortAudio's output callback: a list append under a short lock)."""

    def __init__(self, sound: SpokenSound, rate: int) -> None:
        self._sound = sound
        self.rate = rate
        self._stretch: _Stretch | None = None

    def played(self, block: npt.NDArray[np.int16], sounds_at: float) -> None:
        """block goes to the speaker; its first sample sounds at sounds_at (a monotonic time). The newest
        block places the whole stream in time: the samples before it are its predecessors."""
        self._sound._played(self, block.copy(), sounds_at)


# The sound this process plays: app/voice/playback.py writes it, the dictation pipeline reads it.
SPOKEN = SpokenSound()


def echo_likeness(microphone: npt.NDArray[np.float64], reference: npt.NDArray[np.float64]) -> float:
    """How much the microphone's stretch looks like some part of reference, delayed: the peak of their
    normalized cross-correlation (0 to 1) over every delay that fits (reference is the played sound from
    MAX_DELAY_S before the microphone's stretch to its end)."""
    mic = np.diff(microphone)
    ref = np.diff(reference)
    n = mic.size
    lags = ref.size - n
    mic_norm = float(np.sqrt(mic @ mic))
    if n < 2 or lags < 0 or mic_norm == 0.0:
        return 0.0
    size = _fast_length(ref.size + n)
    products = np.fft.irfft(np.fft.rfft(ref, size) * np.conj(np.fft.rfft(mic, size)), size)[:lags + 1]
    energy = np.concatenate([[0.0], np.cumsum(ref * ref)])
    ref_norms = np.sqrt(np.maximum(energy[n:n + lags + 1] - energy[:lags + 1], 0.0))
    loud = ref_norms > 1e-6 * max(1.0, float(ref_norms.max(initial=0.0)))
    if not loud.any():
        return 0.0
    return float(np.max(np.abs(products[loud]) / (ref_norms[loud] * mic_norm)))


def _fast_length(at_least: int) -> int:
    """The smallest length of at least at_least whose only prime factors are 2, 3 and 5: FFTs of it are
    fast (pocketfft), and it is often half the next power of two (33,750 for the 33,600 a check needs)."""
    best = 1 << max(0, (at_least - 1).bit_length())
    five = 1
    while five < best:
        three = five
        while three < best:
            two = three
            while two < at_least:
                two *= 2
            best = min(best, two)
            three *= 3
        five *= 5
    return best


class EchoCheck:
    """Whether the microphone's latest samples are Kestrel's voice coming back through the room.

    heard_at: the monotonic time the microphone heard a sample, by its number (None before any)."""

    def __init__(self, spoken: SpokenSound, heard_at: Callable[[int], float | None]) -> None:
        self._spoken = spoken
        self._heard_at = heard_at

    def voice_near(self, upto: int) -> bool:
        """Whether the voice sounded late enough that the microphone's window ending at sample upto may hold it
        (cheap: no correlation)."""
        end = self._heard_at(upto)
        return end is not None and self._spoken.played_since(end - WINDOW_S - MAX_DELAY_S)

    def heard(self, recent: npt.NDArray[np.int16], upto: int) -> Whose:
        """recent: the microphone's samples ending at sample number upto."""
        end = self._heard_at(upto)
        if end is None:
            return Whose.NOTHING_PLAYED
        window = recent[-round(WINDOW_S * SAMPLE_RATE):].astype(np.float64)
        start = end - window.size / SAMPLE_RATE
        if not self._spoken.played_since(start - MAX_DELAY_S):
            return Whose.NOTHING_PLAYED
        reference = self._spoken.between(start - MAX_DELAY_S, end + MAX_EARLY_S)
        if not reference.any():
            return Whose.NOTHING_PLAYED
        likeness = echo_likeness(window, reference)
        if likeness >= ECHO_AT:
            return Whose.ECHO
        return Whose.PERSON if likeness < PERSON_BELOW else Whose.UNSURE
