"""The synthesis child's loop: load a voice once, then say each sentence. A Piper voice runs on ONNX Runtime (CPU)
with Kestrel's pronunciation data; a Windows voice is spoken by Windows (app/voice/synthesis/windows_voices.py).

Runs in a process of its own (started by app/voice/synthesis/synthesizer.py through the supervisor), so
that the native runtime failing, or running out of its memory cap, ends only this child. It opens no
socket: the voice and the data are files on disk, and nothing here looks anything up. ONNX Runtime's
telemetry is off (app/__init__.py); nothing here turns it on.
"""

from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from app.voice.synthesis.g2p import Pronouncer
from app.voice.synthesis.protocol import (SentenceSpoken, SpeakSentence, SynthesisChildFailed, VoiceReady,
                                          VoiceUnavailable)
from app.voice.synthesis.windows_voices import (SystemVoiceSpec, WindowsSpeaker, WindowsVoiceError,
                                                join_multithreaded_apartment)

# Piper's symbols: the first and last of an utterance, and the pad between phonemes it was trained with.
_BEGIN, _END, _PAD = "^", "$", "_"


@dataclass(frozen=True)
class VoiceFiles:
    """Where the child finds its voice (model and config) and the pronunciation data."""

    voice_id: str
    model: str
    config: str
    g2p_folder: str


class Speaker:
    """A loaded voice: text's phonemes to ids, ids to audio."""

    def __init__(self, files: VoiceFiles, threads: int) -> None:
        config = json.loads(Path(files.config).read_text(encoding="utf-8"))
        self.sample_rate = int(config["audio"]["sample_rate"])
        inference = config.get("inference", {})
        self._noise = float(inference.get("noise_scale", 0.667))
        self._length = float(inference.get("length_scale", 1.0))
        self._noise_w = float(inference.get("noise_w", 0.8))
        self._ids: dict[str, list[int]] = {str(key): [int(i) for i in value]
                                           for key, value in config["phoneme_id_map"].items()}
        self._pronouncer = Pronouncer.from_folder(Path(files.g2p_folder))
        # Loaded by name: ONNX Runtime ships no type hints.
        ort = importlib.import_module("onnxruntime")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session: Any = ort.InferenceSession(files.model, options, providers=["CPUExecutionProvider"])

    def ids(self, sentence: str) -> list[int]:
        """The sentence's phoneme ids as Piper's training wrote them: begin, each phoneme followed by the pad, end."""
        ids = [*self._ids[_BEGIN], *self._ids[_PAD]]
        for char in self._pronouncer.phonemes(sentence):
            if char in self._ids:
                ids += [*self._ids[char], *self._ids[_PAD]]
        return [*ids, *self._ids[_END]]

    def say(self, sentence: str, speed: float) -> bytes:
        ids = self.ids(sentence)
        scales = np.array([self._noise, self._length / speed, self._noise_w], dtype=np.float32)
        audio = self._session.run(None, {"input": np.array([ids], dtype=np.int64),
                                         "input_lengths": np.array([len(ids)], dtype=np.int64),
                                         "scales": scales})[0]
        samples = np.clip(np.asarray(audio, dtype=np.float32).reshape(-1), -1.0, 1.0)
        return (samples * 32767.0).astype("<i2").tobytes()


def synthesizer_main(conn: Connection, files: VoiceFiles | SystemVoiceSpec, threads: int) -> None:
    """The child's entry (module-level, so it is pickled by name)."""
    speaker: Speaker | WindowsSpeaker
    try:
        if isinstance(files, SystemVoiceSpec):
            join_multithreaded_apartment()
            speaker = WindowsSpeaker(files)
        else:
            speaker = Speaker(files, threads)
    except WindowsVoiceError as exc:  # already in words: what Windows refused and what to do
        conn.send(VoiceUnavailable(str(exc)))
        return
    except Exception as exc:  # a broken voice, data file or runtime: said to the parent, which words it
        conn.send(SynthesisChildFailed(f"{type(exc).__name__}: {exc}"))
        return
    conn.send(VoiceReady(files.voice_id, speaker.sample_rate))
    while True:
        try:
            ask = conn.recv()
        except EOFError:
            return
        if not isinstance(ask, SpeakSentence):
            return  # None: the parent asks it to end
        try:
            conn.send(SentenceSpoken(speaker.say(ask.text, ask.speed)))
        except MemoryError:
            conn.send(SynthesisChildFailed("MemoryError: the sentence needs more memory than the voice may use"))
        except WindowsVoiceError as exc:
            conn.send(VoiceUnavailable(str(exc)))
        except Exception as exc:  # ONNX Runtime's errors from native code
            conn.send(SynthesisChildFailed(f"{type(exc).__name__}: {exc}"))


def default_threads() -> int:
    """Up to four cores: a medium Piper voice gains little past that, and the window keeps the rest."""
    return max(1, min(4, os.cpu_count() or 1))
