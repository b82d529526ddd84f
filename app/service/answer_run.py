"""One answer's life: streamed from the shared engine into the history, told to front ends."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import aclosing

from app.core.answer_stats import AnswerStats, FinishReason
from app.core.conversation import Message, MessageState, Role
from app.core.generation import GenerationSettings
from app.core.history import HistoryError, HistoryStore
from app.engine.failures import Failure
from app.engine.protocol import ChatMessage, Delta, Done, ErrorKind
from app.service.engine_errors import EngineCrashed, EngineError
from app.service.engine_queue import EngineQueue, EngineRequest, Withdrawn
from app.service.events import (ActivityChanged, AnswerFinished, AnswerInterrupted, AnswerStarted, Event,
                                InterruptReason, Problem, Queued, TextGrew)
from app.service.storage import Storage
from app.service.streaming import StreamingAnswer


class AnswerRun:
    """Writes one answer into a conversation while the engine streams it.

    Emits AnswerStarted, TextGrew, Queued and activity while it runs, then
    AnswerFinished, or AnswerInterrupted with why (and a Problem for the user).
    `show` is told of the new answer message and `settle` of its final form, so the
    controller keeps the open chat in step. `stream` is the answer so far.
    """

    def __init__(self, storage: Storage, engine: EngineQueue, emit: Callable[[Event], None], *,
                 show: Callable[[Message], None], settle: Callable[[Message], None], activity: str,
                 threads: int | None = None) -> None:
        self._storage = storage
        self._engine = engine
        self._emit = emit
        self._show = show
        self._settle = settle
        self._activity = activity
        self._threads = threads
        self.finished: Message | None = None  # the answer in its final form, once it has one
        self.cancelled = False
        self.conversation_id: int | None = None
        self.stream: StreamingAnswer | None = None
        self.request: EngineRequest | None = None

    @property
    def running(self) -> bool:
        """True while the engine is writing this answer (not waiting in line)."""
        return self.request is not None and self.request.running

    def cancel(self) -> None:
        """Leave the engine's line, or stop between two tokens; what was written stays."""
        self.cancelled = True  # before the engine is asked: it is never asked
        if self.request is not None:
            self.request.cancel()

    async def run(self, conversation_id: int, prepare: Callable[[int], Awaitable[None]]) -> None:
        """Answer the conversation; prepare(context_length) runs before the engine is asked."""
        self.conversation_id = conversation_id
        try:
            await self._answer(conversation_id, prepare)
        except HistoryError as exc:
            # The disk refused (full, read-only): stop the answer, keep it on screen.
            self.cancel()
            if self.stream is not None and not self.stream.done:
                self._finish(self.stream.unsaved(), InterruptReason.DISK, str(exc))
            self._emit(Problem(f"{exc} The answer so far is on screen but was not saved.", "history"))

    async def _answer(self, conversation_id: int, prepare: Callable[[int], Awaitable[None]]) -> None:
        conversation = await self._storage.history(HistoryStore.get_conversation, conversation_id)
        history = await self._storage.history(HistoryStore.messages, conversation_id)
        stream = self.stream = await StreamingAnswer.start(self._storage, conversation_id)
        self._show(stream.message)
        self._emit(AnswerStarted(stream.message))
        try:
            await prepare(conversation.settings.context_length)
            await self._stream_into(stream, chat_of(conversation.system_prompt, history), conversation.settings)
        except EngineError as exc:  # EngineCrashed too: the next send starts a new engine.
            reason = (InterruptReason.ENGINE_DIED if isinstance(exc, EngineCrashed) else
                      InterruptReason.CONTEXT if exc.kind == ErrorKind.CONTEXT else InterruptReason.ENGINE_FAILED)
            self._finish(await stream.interrupt(AnswerStats(error=exc.message)), reason, exc.message, exc.failure)
            self._emit(Problem(exc.message, "engine" if isinstance(exc, EngineCrashed) else "model"))
        except asyncio.CancelledError:
            if not stream.done:
                self._finish(await stream.interrupt(None), InterruptReason.SHUTDOWN)
            raise

    async def _stream_into(self, stream: StreamingAnswer, chat: list[ChatMessage],
                           settings: GenerationSettings) -> None:
        request = self.request = self._engine.request(chat, settings, trim_history=True, threads=self._threads)
        if self.cancelled:
            request.cancel()  # stopped while the history was read: Withdrawn at once
        self._emit(ActivityChanged(self._activity, stream.message.conversation_id))
        async with aclosing(request.events()) as events:
            async for event in events:
                if isinstance(event, Delta):
                    await stream.append(event.text, thinking=event.thinking)
                    self._emit(TextGrew(stream.message.conversation_id, stream.message_id, event.text,
                                        thinking=event.thinking))
                elif isinstance(event, Done):
                    self._finish(await stream.finish(event.stats))
                    return
                elif isinstance(event, Queued):
                    self._emit(event)
                    self._emit(ActivityChanged(f"Waiting for the engine ({event.position} ahead)…",
                                               stream.message.conversation_id))
                elif isinstance(event, Withdrawn):
                    self._finish(await stream.finish(AnswerStats(finish_reason=FinishReason.CANCELLED)))
                    return

    def _finish(self, message: Message, reason: InterruptReason | None = None, detail: str = "",
                failure: Failure | None = None) -> None:
        self.finished = message
        self._settle(message)
        if reason is None:
            self._emit(AnswerFinished(message))
        else:
            self._emit(AnswerInterrupted(message, reason, detail, failure))


def chat_of(system_prompt: str, history: list[Message]) -> list[ChatMessage]:
    """The conversation as the engine sees it: no empty or unfinished messages."""
    chat = [ChatMessage(Role.SYSTEM, system_prompt)] if system_prompt.strip() else []
    for message in history:
        if message.role != Role.SYSTEM and message.text and message.state != MessageState.STREAMING:
            chat.append(ChatMessage(message.role, message.text, message.thinking))
    return chat
