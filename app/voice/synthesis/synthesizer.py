"""The synthesizer: one child process holding a voice, asked a sentence at a time, bounded in time and memory.

speak() gives the audio sentence by sentence, so a caller can play (or send) the first while the next
is being made: the child is asked for the next sentence before the present one is handed over. One
caller speaks at a time; a second waits until the first has taken its sentences or stopped taking
them. A child that overruns its time, or dies, costs that answer; the next ask starts a new one.
"""

from __future__ import annotations

import io
import logging
import threading
import time
import wave
from collections.abc import Generator, Iterable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np
import numpy.typing as npt

from app.core.children.in_child import ChildLimits
from app.core.children.python_child import PythonChild, start_python_child
from app.voice.synthesis.child import VoiceFiles, default_threads, synthesizer_main
from app.voice.synthesis.protocol import (SentenceSpoken, SpeakSentence, SynthesisChildFailed, SynthesisReply,
                                          VoiceReady, VoiceUnavailable)
from app.voice.synthesis.reading import MAX_TEXT_CHARS, TextProblem, TextRefused, checked, sentences
from app.voice.synthesis.voices import (ENGLISH_G2P, JOE, SpeakingVoice, VoiceError, default_voice, ensure_bundle,
                                        ensure_voice, voice_shipped)
from app.voice.synthesis.windows_voices import WINDOWS_DEFAULT, SystemVoice, SystemVoiceSpec, spec_of
from app.voice.transcriber import FailureKind

log = logging.getLogger(__name__)

MIN_SPEED = 0.25
MAX_SPEED = 4.0
# The rate of a WAV file with no sentence in it (every voice Kestrel ships says 22,050 samples a second).
DEFAULT_RATE = 22_050


@dataclass(frozen=True)
class SynthesizerLimits:
    """What the child runs under. memory_bytes: its address space, which ONNX Runtime's libraries and
    threads reserve far beyond what they touch (measured on Linux with en_US-joe-medium: 720 MB of address
    space and 330 MB resident at peak for short sentences, 1.5 GB and 730 MB for one of 274 characters;
    reading.py cuts sentences at 200); load_s: loading the voice and the dictionary;
    base_s + per_char_s × a sentence's length: saying it."""

    memory_bytes: int = 2 * 1024 ** 3
    load_s: float = 60.0
    base_s: float = 30.0
    per_char_s: float = 0.2
    threads: int = 0  # 0: default_threads()


class SynthesisFailed(Exception):
    """The synthesizer could not answer: a kind plus facts (the child's own words, or the seconds it had)."""

    def __init__(self, kind: FailureKind, detail: str = "") -> None:
        super().__init__(kind, detail)
        self.kind = kind
        self.detail = detail


@dataclass(frozen=True)
class SpokenSentence:
    """One sentence said: its text (as written out for speaking) and its audio, 16-bit mono PCM at sample_rate."""

    text: str
    pcm: bytes
    sample_rate: int

    @property
    def samples(self) -> npt.NDArray[np.int16]:
        return np.frombuffer(self.pcm, dtype="<i2").astype(np.int16)

    @property
    def seconds(self) -> float:
        return len(self.pcm) / 2 / self.sample_rate


def wav_file(spoken: Iterable[SpokenSentence], sample_rate: int | None = None) -> bytes:
    """A 16-bit mono WAV file of the sentences one after the other (rate: theirs, or sample_rate when there are none)."""
    pcm = bytearray()
    rate = sample_rate or DEFAULT_RATE
    for sentence in spoken:
        pcm += sentence.pcm
        rate = sentence.sample_rate
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes(bytes(pcm))
    return out.getvalue()


class Synthesizer:
    """Owns the synthesis child: started on the first ask (for the voice asked), ended by close()."""

    def __init__(self, speech_folder: Path, limits: SynthesizerLimits = SynthesizerLimits()) -> None:
        self._speech_folder = speech_folder
        self._limits = limits
        self._turn = threading.Lock()
        self._child: PythonChild | None = None
        self._conn: Connection | None = None
        self._voice: str | None = None  # the id of the voice the child was started for
        self._windows_failed = False  # Windows' default voice could not speak here: Joe stands in
        self._rate = DEFAULT_RATE

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs (tests and the privacy check watch it)."""
        return self._child.pid if self._child is not None and self._child.is_alive() else None

    @property
    def voice(self) -> str | None:
        """The id of the voice the child holds (None: no child)."""
        return self._voice if self.pid is not None else None

    def speak(self, text: str, voice: SpeakingVoice | None = None, speed: float = 1.0, *,
              limit: int = MAX_TEXT_CHARS) -> Generator[SpokenSentence, None, None]:
        """The text's sentences said, one by one (voice None: default_voice()). TextRefused at once for an empty
        text or one past limit characters; while iterating, SynthesisFailed, or VoiceError (the voice packages
        missing or changed, a Windows voice that cannot speak: in words)."""
        if not MIN_SPEED <= speed <= MAX_SPEED:
            raise ValueError(f"speed {speed} is outside {MIN_SPEED}-{MAX_SPEED}")
        voice = voice or default_voice()
        # A Windows voice reads numbers, abbreviations and accents in its own language, in any script: the text
        # is only cut into sentences. A Piper voice reads English written out for it.
        windows = isinstance(voice, SystemVoice)
        said = sentences(checked(text, limit, any_script=windows), written_out=not windows)
        if not said:
            raise TextRefused(TextProblem.EMPTY, len(text), limit)
        return self._spoken(said, voice, speed)

    def close(self) -> None:
        """End the child (asked over the pipe first, killed if it does not go)."""
        with self._turn:
            self._end(kill=False)

    def _spoken(self, said: list[str], voice: SpeakingVoice, speed: float) -> Generator[SpokenSentence, None, None]:
        with self._turn:
            waiting: int | None = None  # the sentence the child is working on
            try:
                conn, pcm = self._first(voice, SpeakSentence(said[0], speed))
                for number, sentence in enumerate(said):
                    if number > 0:
                        pcm = self._pcm(conn, sentence)
                        waiting = None
                    if number + 1 < len(said):
                        conn.send(SpeakSentence(said[number + 1], speed))
                        waiting = number + 1
                    yield SpokenSentence(sentence, pcm, self._rate)
            except SynthesisFailed as failed:
                waiting = None
                if failed.kind is not FailureKind.FAILED:  # a child that said why it failed is still sound
                    self._end(kill=True)
                raise
            except VoiceError:  # a Windows voice that stopped speaking answered in words: nothing else is owed
                waiting = None
                self._end(kill=True)
                raise
            except (OSError, EOFError) as exc:  # the pipe broke: the child is gone
                waiting = None
                self._end(kill=True)
                raise SynthesisFailed(FailureKind.DIED, str(exc)) from exc
            finally:
                if waiting is not None:  # the caller stopped taking sentences: the child's answer is dropped
                    self._drop_answer(said[waiting])

    def _first(self, voice: SpeakingVoice, ask: SpeakSentence) -> tuple[Connection, bytes]:
        """The first sentence's audio. A child that was running before may have died meanwhile without its
        pipe saying so yet (killed a moment ago): its broken pipe costs nothing, a new child is asked once."""
        reused = self._running(voice)
        conn = self._started(voice)
        try:
            conn.send(ask)
            return conn, self._pcm(conn, ask.text)
        except (OSError, EOFError, SynthesisFailed) as exc:
            if not reused or isinstance(exc, SynthesisFailed) and exc.kind is not FailureKind.DIED:
                raise
        self._end(kill=True)
        conn = self._started(voice)
        conn.send(ask)
        return conn, self._pcm(conn, ask.text)

    def _pcm(self, conn: Connection, sentence: str) -> bytes:
        reply = self._reply(conn, self._limits.base_s + self._limits.per_char_s * len(sentence))
        if isinstance(reply, SentenceSpoken):
            return reply.pcm
        if isinstance(reply, VoiceUnavailable):
            raise VoiceError(reply.words)
        detail = reply.detail if isinstance(reply, SynthesisChildFailed) else repr(reply)
        raise SynthesisFailed(FailureKind.FAILED, detail)

    def _drop_answer(self, sentence: str) -> None:
        try:
            if self._conn is not None:
                self._pcm(self._conn, sentence)
        except (SynthesisFailed, OSError, EOFError):
            self._end(kill=True)

    def _running(self, voice: SpeakingVoice) -> bool:
        # An idle child has nothing to say: a readable pipe means it ended (its end closed).
        return (self._conn is not None and self._child is not None and self._child.is_alive()
                and self._voice == voice.id and not self._conn.poll(0))

    def _started(self, voice: SpeakingVoice) -> Connection:
        if self._running(voice) and self._conn is not None:
            return self._conn
        self._end(kill=True)
        if voice is WINDOWS_DEFAULT and self._windows_failed and voice_shipped(JOE):
            conn = self._start(JOE)
        else:
            try:
                conn = self._start(voice)
            except VoiceError as exc:
                if voice is not WINDOWS_DEFAULT or not voice_shipped(JOE):
                    raise
                # Nobody chose Windows' voice: it was the default, and Windows cannot speak (an N or Server
                # edition without its speech files). Joe speaks instead, and is tried first from now on.
                log.warning("Windows' voice could not speak (%s); Joe speaks instead", exc)
                self._windows_failed = True
                conn = self._start(JOE)
        self._voice = voice.id  # the voice asked for: the next ask for it finds this child running
        return conn

    def _start(self, voice: SpeakingVoice) -> Connection:
        """A new child speaking with voice, loaded; its rate kept. VoiceError or SynthesisFailed otherwise."""
        files: VoiceFiles | SystemVoiceSpec
        if isinstance(voice, SystemVoice):
            files = spec_of(voice)
        else:
            voice_folder = ensure_voice(voice, self._speech_folder)
            g2p_folder = ensure_bundle(ENGLISH_G2P, self._speech_folder)
            files = VoiceFiles(voice.id, str(voice_folder / voice.model_file), str(voice_folder / voice.config_file),
                               str(g2p_folder))
        limits = ChildLimits(memory_bytes=self._limits.memory_bytes, ignore_interrupt=True)
        self._child, self._conn = start_python_child(
            synthesizer_main, (files, self._limits.threads or default_threads()), name="kestrel-synthesizer",
            limits=limits)
        try:
            ready = self._reply(self._conn, self._limits.load_s)
        except (SynthesisFailed, OSError, EOFError) as exc:
            self._end(kill=True)
            raise SynthesisFailed(FailureKind.LOAD_FAILED, str(exc)) from exc
        if isinstance(ready, VoiceUnavailable):
            self._end(kill=True)
            raise VoiceError(ready.words)
        if not isinstance(ready, VoiceReady):
            self._end(kill=True)
            raise SynthesisFailed(FailureKind.LOAD_FAILED, getattr(ready, "detail", repr(ready)))
        self._rate = ready.sample_rate
        return self._conn

    def _reply(self, conn: Connection, seconds: float) -> SynthesisReply:
        deadline = time.monotonic() + seconds
        while not conn.poll(min(0.5, max(0.0, deadline - time.monotonic()))):
            if self._child is None or not self._child.is_alive():
                if conn.poll(0):  # its last words came before it ended
                    break
                code = self._child.exitcode if self._child is not None else None
                raise SynthesisFailed(FailureKind.DIED, f"exit code {code}")
            if time.monotonic() >= deadline:
                raise SynthesisFailed(FailureKind.TIMED_OUT, f"{seconds:.0f}")
        reply: SynthesisReply = conn.recv()
        return reply

    def _end(self, *, kill: bool) -> None:
        child, conn = self._child, self._conn
        self._child = self._conn = None
        self._voice = None
        if conn is not None:
            try:
                if not kill:
                    conn.send(None)
            except OSError:
                pass  # already gone
            conn.close()
        if child is not None:
            child.end(grace_s=0.0 if kill else 2.0)
