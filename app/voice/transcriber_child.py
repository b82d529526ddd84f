"""The transcription child's loop: load Whisper once (faster-whisper on CTranslate2), then turn each ask into a transcript.

Runs in a process of its own (started by app/voice/transcriber.py through the supervisor), so that a
decoder or the native runtime that fails on a hostile file, or runs out of its memory cap, ends only
this child. It opens no socket: the model is a folder on disk, and nothing here looks anything up.
"""

from __future__ import annotations

import importlib
import os
from multiprocessing.connection import Connection
from typing import Any

from app.voice.audio import SAMPLE_RATE, AudioRefused, decode
from app.voice.protocol import (AudioRejected, ChildFailed, ChildReady, Decoded, Segment, TranscribeAsk, Transcribed,
                                Transcript)

# Greedy decoding: beam search multiplies the decoder's work, and a dictation wants its words soon.
_BEAM_SIZE = 1


def transcriber_main(conn: Connection, model_folder: str, model_id: str, multilingual: bool, threads: int) -> None:
    """The child's entry (module-level, so it is pickled by name)."""
    try:
        model = _load(model_folder, threads)
    except Exception as exc:  # a broken model folder or runtime: said to the parent, which words it
        conn.send(ChildFailed(f"{type(exc).__name__}: {exc}"))
        return
    conn.send(ChildReady(model_id, multilingual))
    while True:
        try:
            ask = conn.recv()
        except EOFError:
            return
        if not isinstance(ask, TranscribeAsk):
            return  # None: the parent asks it to end
        conn.send(_answer(model, ask, model_id, multilingual, conn))


def _load(model_folder: str, threads: int) -> Any:
    # Loaded by name: faster-whisper comes with the optional `voice` extra and ships no type hints.
    whisper = importlib.import_module("faster_whisper")
    return whisper.WhisperModel(model_folder, device="cpu", compute_type="int8", cpu_threads=threads,
                                num_workers=1, local_files_only=True)


def _answer(model: Any, ask: TranscribeAsk, model_id: str, multilingual: bool,
            conn: Connection) -> Transcribed | AudioRejected | ChildFailed:
    try:
        samples = decode(ask.audio, ask.kind)
    except AudioRefused as refused:
        return AudioRejected(refused.problem, refused.detail)
    conn.send(Decoded(samples.size / SAMPLE_RATE))  # the parent's time limit follows the audio's length
    language = ask.language if multilingual else "en"
    try:
        pieces, info = model.transcribe(samples, language=language, beam_size=_BEAM_SIZE,
                                        condition_on_previous_text=False, vad_filter=False)
        segments = tuple(_segment(piece) for piece in pieces)
    except MemoryError:
        return ChildFailed("MemoryError: the audio needs more memory than the transcriber may use")
    except Exception as exc:  # CTranslate2's errors are RuntimeErrors from native code
        return ChildFailed(f"{type(exc).__name__}: {exc}")
    text = " ".join(segment.text for segment in segments if segment.text)
    return Transcribed(Transcript(text, segments, str(info.language), round(float(info.language_probability), 4),
                                  round(samples.size / SAMPLE_RATE, 3), model_id))


def default_threads() -> int:
    """Up to four cores: a small Whisper model gains little past that, and the window keeps the rest."""
    return max(1, min(4, os.cpu_count() or 1))


def _segment(piece: Any) -> Segment:
    """faster-whisper's segment as the wire's."""
    return Segment(round(float(piece.start), 3), round(float(piece.end), 3), str(piece.text).strip(),
                   tuple(int(token) for token in piece.tokens), int(piece.seek), float(piece.temperature or 0.0),
                   float(piece.avg_logprob), float(piece.compression_ratio), float(piece.no_speech_prob))
