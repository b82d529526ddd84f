"""Read-aloud's owner: one answer read at a time, from a press or as it streams; its events on the loop.

Policy: read() says a finished answer; with the setting "Read answers aloud as they are written" on,
each answer the chats start is followed (hear(): AnswerStarted, TextGrew, AnswerFinished) and its
complete sentences are said as they arrive, the rest when it ends. A new reading stops the one before;
stop() silences the sound at once and drops what was waiting. The synthesizer's child is started at the
first reading (on a thread) and kept until close(), at shutdown. Nothing here waits on the loop: the
voice and the sound run on the reading's threads (read_aloud_reading.py), and their news comes back
through call_soon_threadsafe. Only an answer's visible words are read (read_aloud_text.py), and no audio
is written anywhere.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.core.voice_settings import VoiceSettings
from app.service.events import AnswerFinished, AnswerInterrupted, AnswerStarted, TextGrew
from app.service.voice.read_aloud_events import (ReadAloudEvent, ReadAloudFailed, ReadAloudState,
                                                 ReadAloudStateChanged)
from app.service.voice.read_aloud_reading import Reading, ReadingEnded, ReadingFailed, ReadingNews, ReadingStarted
from app.service.voice.read_aloud_text import AnswerFollower, speakable

if TYPE_CHECKING:  # numpy comes with the synthesizer: imported at the first reading, on its thread
    from app.voice.synthesis.synthesizer import Synthesizer
    from app.voice.synthesis.voices import SpeakingVoice

# How long shutdown waits for a reading's threads to notice the stop, then for the child to end.
CLOSE_WAIT_S = 5.0
Listener = Callable[[ReadAloudEvent], None]
Spawn = Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]]


class ReadAloud:
    """The window's read-aloud: read(), follow() and stop(); hear its events with subscribe(); `state`
    and `message_id` (the answer read now, None when idle) are as they are now. hear() is given the
    service's events (the answers' growth) once listen_to_answers() was asked."""

    def __init__(self, settings: Callable[[], VoiceSettings], speech_folder: Path, spawn: Spawn, *,
                 synthesizer: Synthesizer | None = None, voice: SpeakingVoice | None = None) -> None:
        """synthesizer: one to use (the tests share theirs); None: made at the first reading, closed in close()."""
        self._settings = settings
        self._speech_folder = speech_folder
        self._spawn = spawn
        self._voice = voice
        self._synthesizer = synthesizer
        self._own_synthesizer = synthesizer is None
        self._making = threading.Lock()
        self._listeners: list[Listener] = []
        self._reading: Reading | None = None
        self._follower: AnswerFollower | None = None
        self._ending: list[Reading] = []
        self._unsubscribe: Callable[[], None] | None = None
        self.state = ReadAloudState.IDLE
        self.message_id: int | None = None

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call listener (on the loop) with every read-aloud event from now on; returns what unsubscribes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def read(self, message_id: int, text: str) -> None:
        """Say a written answer (its Markdown: read_aloud_text.speakable), stopping any other reading."""
        reading = self._begin(message_id)
        reading.say(speakable(text))
        reading.end()

    def toggle(self, message_id: int, text: str) -> None:
        """An answer's speaker: stop when that answer is being read, else read it."""
        if self.message_id == message_id and self.state is not ReadAloudState.IDLE:
            self.stop()
        else:
            self.read(message_id, text)

    def follow(self, message_id: int) -> None:
        """Read an answer as it is written: grow() with its text, finish() when it ends."""
        self._begin(message_id)
        self._follower = AnswerFollower()

    def grow(self, message_id: int, delta: str) -> None:
        reading, follower = self._reading, self._follower
        if reading is not None and follower is not None and reading.message_id == message_id:
            reading.say(follower.grow(delta))

    def finish(self, message_id: int) -> None:
        reading, follower = self._reading, self._follower
        if reading is not None and follower is not None and reading.message_id == message_id:
            reading.say(follower.finish())
            reading.end()
            self._follower = None

    def stop(self) -> None:
        """Silence the reading now (on a thread of its own: closing a stream may wait on the driver)."""
        self._drop()
        if self.state is not ReadAloudState.IDLE:
            self._set(ReadAloudState.IDLE, None)

    def listen_to_answers(self, subscribe: Callable[[Callable[[object], None]], Callable[[], None]]) -> None:
        """Hear the chats' answers from now on (once, however often asked): the window asks, so that an answer
        streams aloud there when the setting says so, while `kestrel chat` (the same settings) stays silent."""
        if self._unsubscribe is None:
            self._unsubscribe = subscribe(self.hear)

    def hear(self, event: object) -> None:
        """The service's events: the answers' start, growth and end (followed while the setting is on)."""
        if isinstance(event, AnswerStarted):
            if self._settings().read_aloud_answers:
                self.follow(event.message.id)
        elif isinstance(event, TextGrew):
            if not event.thinking:
                self.grow(event.message_id, event.delta)
        elif isinstance(event, (AnswerFinished, AnswerInterrupted)):
            self.finish(event.message.id)

    async def release(self, voice_id: str) -> bool:
        """Let go of a voice about to be removed: the synthesis child ends (Windows will not delete a file a process
        holds open; the next reading starts one again). False while an answer is read aloud: it may be with it."""
        synthesizer = self._synthesizer
        if synthesizer is None or not self._own_synthesizer:
            return True
        if self._reading is not None and self._reading.running:
            return False
        await asyncio.to_thread(synthesizer.close)
        return True

    async def close(self) -> None:
        """At shutdown: silence any reading, let its threads end (bounded), then end the synthesis child."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self.stop()
        ending, self._ending = self._ending, []
        for reading in ending:
            await asyncio.to_thread(reading.join, CLOSE_WAIT_S)
        if self._synthesizer is not None and self._own_synthesizer:
            await asyncio.to_thread(self._synthesizer.close)

    @property
    def synthesis_pid(self) -> int | None:
        """The synthesis child's process id while it runs (the tests watch it)."""
        return self._synthesizer.pid if self._synthesizer is not None else None

    # --- inside -------------------------------------------------------------------------------

    def _drop(self) -> None:
        reading = self._reading
        self._reading = self._follower = None
        if reading is not None:
            threading.Thread(target=reading.stop, name="kestrel-read-aloud-stop", daemon=True).start()

    def _begin(self, message_id: int) -> Reading:
        self._drop()
        settings = self._settings()
        reading = self._reading = Reading(message_id, self._synthesizer_now, self._voice, settings.voice_speed,
                                          settings.speaker, settings.voice)
        self._ending = [old for old in self._ending if old.running]
        self._ending.append(reading)
        self._set(ReadAloudState.PREPARING, message_id)
        self._spawn(self._start(reading))
        return reading

    async def _start(self, reading: Reading) -> None:
        loop = asyncio.get_running_loop()

        def tell(news: ReadingNews) -> None:
            try:
                loop.call_soon_threadsafe(self._news, reading, news)
            except RuntimeError:  # the loop closed at exit: nobody is left to tell
                pass

        reading.start(tell)

    def _news(self, reading: Reading, news: ReadingNews) -> None:
        if reading is not self._reading:
            return  # a reading stopped or replaced: its news is old
        if isinstance(news, ReadingStarted):
            self._set(ReadAloudState.SPEAKING, reading.message_id)
        elif isinstance(news, ReadingEnded):
            self._reading = self._follower = None
            self._set(ReadAloudState.IDLE, None)
        elif isinstance(news, ReadingFailed):
            self.stop()
            self._emit(ReadAloudFailed(reading.message_id, news.problem, news.device, news.failure, news.detail,
                                       news.packages))

    def _synthesizer_now(self) -> Synthesizer:
        """On a reading's thread: the synthesizer, made the first time (its child starts at its first sentence)."""
        from app.voice.synthesis.synthesizer import Synthesizer
        with self._making:
            if self._synthesizer is None:
                self._synthesizer = Synthesizer(self._speech_folder)
            return self._synthesizer

    def _set(self, state: ReadAloudState, message_id: int | None) -> None:
        self.state, self.message_id = state, message_id
        self._emit(ReadAloudStateChanged(state, message_id))

    def _emit(self, event: ReadAloudEvent) -> None:
        for listener in list(self._listeners):
            listener(event)
