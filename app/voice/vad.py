"""Voice activity over 16 kHz PCM frames: Silero VAD v6 (ONNX, run with ONNX Runtime, no torch) says where speech starts and ends.

The weights are the silero_vad_v6.onnx that faster-whisper 1.2.1 ships (MIT, the `voice` extra), found
in place and checked by SHA-256 before they load. Feed frames of any length as they come from the
microphone; each 32 ms window gets a speech probability, and hysteresis (a higher bar to start than to
go on) with a silence hang-over turns them into SpeechStarted / SpeechEnded, times in seconds from the
first frame fed.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from app.voice.audio import SAMPLE_RATE
from app.voice.speech_models import VOICE_EXTRA, SpeechModelError, file_sha256, package_folder

VAD_PACKAGE = "faster_whisper"
VAD_FILE = "assets/silero_vad_v6.onnx"
VAD_SHA256 = "4cbf549b8326f60f80f2536d9eefeb450a9abe83365a098031c89719f1be17d2"
VAD_LICENSE = "MIT"
# The model reads 512 new samples (32 ms) with the 64 before them as context, and carries its state.
WINDOW = 512
CONTEXT = 64


@dataclass(frozen=True)
class VadSettings:
    """start: probability that opens speech; keep: the lower one that holds it open; hang_over_ms: silence
    that closes it (a pause between words is shorter). A short burst (a click) still ends with its
    SpeechEnded, whose length the owner may judge: holding back the start would delay a barge-in."""

    start: float = 0.5
    keep: float = 0.35
    hang_over_ms: int = 500


@dataclass(frozen=True)
class SpeechStarted:
    at: float


@dataclass(frozen=True)
class SpeechEnded:
    at: float
    started: float


SpeechEvent = SpeechStarted | SpeechEnded


def vad_model_path() -> Path:
    """The Silero model file, checked; SpeechModelError (with what to install) when it is missing or changed."""
    folder = package_folder(VAD_PACKAGE)
    path = folder / VAD_FILE if folder is not None else None
    if path is None or not path.is_file():
        raise SpeechModelError("The voice activity model is not installed. Install it: "
                               f"pip install 'kestrel[{VOICE_EXTRA}]'.")
    if file_sha256(path) != VAD_SHA256:
        raise SpeechModelError("The voice activity model did not match its checksum. Reinstall it: "
                               f"pip install --force-reinstall 'kestrel[{VOICE_EXTRA}]'.")
    return path


class VoiceActivity:
    """One stream's detector: feed() frames, get the events they complete. Not thread-safe: one stream, one owner."""

    def __init__(self, settings: VadSettings = VadSettings(), path: Path | None = None) -> None:
        onnxruntime: Any = importlib.import_module("onnxruntime")
        options = onnxruntime.SessionOptions()
        # One thread: 32 ms of audio takes well under a millisecond, and dictation runs beside the model.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 4
        self._session = onnxruntime.InferenceSession(str(path or vad_model_path()), sess_options=options,
                                                     providers=["CPUExecutionProvider"])
        self._settings = settings
        self._state = np.zeros((2, 1, 1, 128), dtype=np.float32)  # the model's h and c
        self._context = np.zeros(CONTEXT, dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)
        self._fed = 0  # samples turned into probabilities so far
        self._speech_from: float | None = None
        self._silence_from: float | None = None
        self._last_probability = 0.0

    @property
    def speaking(self) -> bool:
        return self._speech_from is not None

    @property
    def quiet_since(self) -> float | None:
        """Where the open speech's present silence began (seconds from the first frame): set during the
        hang-over, None while the last window was speech or no speech is open."""
        return self._silence_from if self._speech_from is not None else None

    @property
    def voiced(self) -> bool:
        """Whether the last window held speech (not the hang-over's silence after it)."""
        return self._last_probability >= self._settings.keep

    def feed(self, frame: npt.NDArray[np.int16] | npt.NDArray[np.float32]) -> list[SpeechEvent]:
        """Frames of 16 kHz mono audio (int16, or float32 in [-1, 1]); the events they complete."""
        samples = frame.astype(np.float32) / 32768.0 if frame.dtype == np.int16 else frame.astype(np.float32)
        self._pending = np.concatenate([self._pending, samples.reshape(-1)])
        events: list[SpeechEvent] = []
        while self._pending.size >= WINDOW:
            window, self._pending = self._pending[:WINDOW], self._pending[WINDOW:]
            probability = self._last_probability = self._probability(window)
            self._fed += WINDOW
            event = self._step(probability, (self._fed - WINDOW) / SAMPLE_RATE)
            if event is not None:
                events.append(event)
        return events

    def finish(self) -> list[SpeechEvent]:
        """The stream ended: speech still open ends where the audio did."""
        if self._speech_from is None:
            return []
        started, self._speech_from, self._silence_from = self._speech_from, None, None
        return [SpeechEnded(self._fed / SAMPLE_RATE, started)]

    def _probability(self, window: npt.NDArray[np.float32]) -> float:
        joined = np.concatenate([self._context, window])[np.newaxis, :]
        output, h, c = self._session.run(None, {"input": joined, "h": self._state[0], "c": self._state[1]})
        self._state = np.stack([h, c])
        self._context = window[-CONTEXT:]
        return float(np.asarray(output).reshape(-1)[0])

    def _step(self, probability: float, at: float) -> SpeechEvent | None:
        settings = self._settings
        if self._speech_from is None:
            if probability >= settings.start:
                self._speech_from, self._silence_from = at, None
                return SpeechStarted(at)
            return None
        if probability >= settings.keep:
            self._silence_from = None
            return None
        if self._silence_from is None:
            self._silence_from = at
        if (at + WINDOW / SAMPLE_RATE - self._silence_from) * 1000 < settings.hang_over_ms:
            return None
        started, ended = self._speech_from, self._silence_from
        self._speech_from = self._silence_from = None
        return SpeechEnded(ended, started)
