"""The transcriber: one child process holding a Whisper model, asked one thing at a time, bounded in time and memory.

Blocking calls, safe from several threads (they take turns): an asyncio caller runs them in a thread.
A child that overruns its time is killed and the next ask starts a new one, as the engine does.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from enum import StrEnum
from multiprocessing.connection import Connection
from pathlib import Path

from app.core.children.in_child import ChildLimits
from app.core.children.python_child import PythonChild, start_python_child
from app.voice.audio import AudioRefused
from app.voice.protocol import (AudioRejected, ChildFailed, ChildReady, ChildReply, Decoded, TranscribeAsk,
                                Transcribed, Transcript)
from app.voice.speech_models import SpeechModel, ensure_speech_model
from app.voice.transcriber_child import default_threads, transcriber_main


@dataclass(frozen=True)
class TranscriberLimits:
    """What the child runs under. memory_bytes: its address space, which the runtime's libraries and
    threads reserve far beyond what they touch (measured on Linux after 10 s of speech: 754 MB of address
    space, 257 MB resident at peak for tiny.en; 800 and 329 MB for base), with room for two hours of
    audio as float32 (460 MB); load_s: loading the model; decode_s: reading the audio;
    base_s + per_audio_s × the audio's length: transcribing it."""

    memory_bytes: int = 3 * 1024 ** 3
    load_s: float = 60.0
    decode_s: float = 60.0
    base_s: float = 30.0
    per_audio_s: float = 2.0
    threads: int = 0  # 0: default_threads()


class FailureKind(StrEnum):
    """Why the transcriber gave no transcript (the audio's own problems are AudioRefused)."""

    TIMED_OUT = "timed_out"
    DIED = "died"
    LOAD_FAILED = "load_failed"
    FAILED = "failed"


class TranscriptionFailed(Exception):
    """The transcriber could not answer: a kind plus facts (the child's own words, or the seconds it had)."""

    def __init__(self, kind: FailureKind, detail: str = "") -> None:
        super().__init__(kind, detail)
        self.kind = kind
        self.detail = detail


class Transcriber:
    """Owns the transcription child for one speech model: started on the first ask, ended by close()."""

    def __init__(self, model: SpeechModel, speech_folder: Path, limits: TranscriberLimits = TranscriberLimits()) -> None:
        self.model = model
        self._speech_folder = speech_folder
        self._limits = limits
        self._turn = threading.Lock()
        self._child: PythonChild | None = None
        self._conn: Connection | None = None

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs (tests and the privacy check watch it)."""
        return self._child.pid if self._child is not None and self._child.is_alive() else None

    def transcribe(self, ask: TranscribeAsk) -> Transcript:
        """The transcript of ask's audio; AudioRefused, TranscriptionFailed or SpeechModelError otherwise."""
        with self._turn:
            conn = self._started()
            try:
                conn = self._sent(conn, ask)
                reply = self._reply(conn, self._limits.decode_s)
                if isinstance(reply, Decoded):
                    reply = self._reply(conn, self._limits.base_s + self._limits.per_audio_s * reply.seconds)
            except TranscriptionFailed:
                self._end(kill=True)
                raise
            except (OSError, EOFError) as exc:  # the pipe broke: the child is gone
                self._end(kill=True)
                raise TranscriptionFailed(FailureKind.DIED, str(exc)) from exc
        if isinstance(reply, Transcribed):
            return reply.transcript
        if isinstance(reply, AudioRejected):
            raise AudioRefused(reply.problem, reply.detail)
        detail = reply.detail if isinstance(reply, ChildFailed) else repr(reply)
        raise TranscriptionFailed(FailureKind.FAILED, detail)

    def close(self) -> None:
        """End the child (asked over the pipe first, killed if it does not go)."""
        with self._turn:
            self._end(kill=False)

    def _sent(self, conn: Connection, ask: TranscribeAsk) -> Connection:
        """ask sent to the child; one that died while idle (its pipe broke) is replaced once."""
        try:
            conn.send(ask)
            return conn
        except OSError:
            self._end(kill=True)
        conn = self._started()
        conn.send(ask)
        return conn

    def _started(self) -> Connection:
        # An idle child has nothing to say: a readable pipe means it ended (its end closed).
        if self._conn is not None and self._child is not None and self._child.is_alive() and not self._conn.poll(0):
            return self._conn
        self._end(kill=True)
        folder = ensure_speech_model(self.model, self._speech_folder)
        limits = ChildLimits(memory_bytes=self._limits.memory_bytes, ignore_interrupt=True)
        threads = self._limits.threads or default_threads()
        self._child, self._conn = start_python_child(
            transcriber_main, (str(folder), self.model.id, self.model.multilingual, threads),
            name="kestrel-transcriber", limits=limits)
        try:
            ready = self._reply(self._conn, self._limits.load_s)
        except (TranscriptionFailed, OSError, EOFError) as exc:
            self._end(kill=True)
            raise TranscriptionFailed(FailureKind.LOAD_FAILED, str(exc)) from exc
        if not isinstance(ready, ChildReady):
            self._end(kill=True)
            raise TranscriptionFailed(FailureKind.LOAD_FAILED, getattr(ready, "detail", repr(ready)))
        return self._conn

    def _reply(self, conn: Connection, seconds: float) -> ChildReply:
        deadline = time.monotonic() + seconds
        while not conn.poll(min(0.5, max(0.0, deadline - time.monotonic()))):
            if self._child is None or not self._child.is_alive():
                if conn.poll(0):  # its last words came before it ended
                    break
                code = self._child.exitcode if self._child is not None else None
                raise TranscriptionFailed(FailureKind.DIED, f"exit code {code}")
            if time.monotonic() >= deadline:
                raise TranscriptionFailed(FailureKind.TIMED_OUT, f"{seconds:.0f}")
        reply: ChildReply = conn.recv()
        return reply

    def _end(self, *, kill: bool) -> None:
        child, conn = self._child, self._conn
        self._child = self._conn = None
        if conn is not None:
            try:
                if not kill:
                    conn.send(None)
            except OSError:
                pass  # already gone
            conn.close()
        if child is not None:
            child.end(grace_s=0.0 if kill else 2.0)
