"""One answer's life: streamed from the shared engine into the history, told to front ends."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import replace

from app.core.answer_stats import AnswerStats, FinishReason
from app.core.attachments import SourceRef
from app.core.conversation import Conversation, Message, MessageState, Part, Role, ToolCallPart, ToolResultPart
from app.core.message_parts import tool_rounds
from app.core.generation import GenerationSettings
from app.core.store.history import HistoryError, HistoryStore
from app.core.store.memories import record_memories_used
from app.engine.failures import Failure
from app.engine.protocol import AnswerShape, ChatMessage, Delta, Done, ErrorKind, ToolCall
from app.service.documents.attached_images import turns_with_images, unseen_note
from app.service.chats.memory.memory_prompt import MemoryUse
from app.service.documents.document_context import Framed
from app.service.models.engine_errors import EngineCrashed, EngineError
from app.service.models.engine_queue import EngineQueue, EngineRequest, Withdrawn
from app.service.events import (THINKING, WRITING, ActivityChanged, AnswerFinished, AnswerInterrupted, AnswerStarted, Event,
                                InterruptReason, Problem, Queued, TextGrew, ToolPartsChanged)
from app.service.storage import Storage
from app.service.chats.streaming import StreamingAnswer
from app.service.chats.temporary import is_temporary
from app.service.tools.tool_room import ResultRoom
from app.service.tools.tool_use import ToolUse
from app.service.tools.tools_answered import ToolsAnswered
from app.service.chats.vision import VisionState
from app.tools.values import ToolInfo

# The chat's messages with the user's documents put in, and the sources to keep on the answer
# (document_context.py); the flag: whether the model sees the chat's images (their cost in the fit).
Framing = Callable[[Conversation, list[Message], bool], Awaitable[Framed]]
# The memories for the chat's answer (MemoryBook.for_answer): its system prompt's section and their ids.
Remembering = Callable[[Conversation, list[Message]], Awaitable[MemoryUse]]


class AnswerRun:
    """Writes one answer into a conversation while the engine streams it.

    Emits AnswerStarted, TextGrew, Queued and activity while it runs, then
    AnswerFinished, or AnswerInterrupted with why (and a Problem for the user).
    `show` is told of the new answer message and `settle` of its final form, so the
    open chat keeps in step. `stream` is the answer so far.
    """

    def __init__(self, storage: Storage, engine: EngineQueue, emit: Callable[[Event], None], *,
                 show: Callable[[Message], None], settle: Callable[[Message], None],
                 pace_words: Callable[[], str | None] = lambda: None,
                 threads: int | None = None, tools: ToolUse | None = None, tool_rounds: int = 8,
                 frame: Framing | None = None, vision: VisionState = VisionState(True, ""),
                 remember: Remembering | None = None, builtin_tools: bool = True) -> None:
        self._storage = storage
        self._engine = engine
        self._emit = emit
        self._show = show
        self._settle = settle
        self._pace_words = pace_words  # "Paused…", "Running gently…"; None or "" at full speed
        self._shown_thinking: bool | None = None
        self._threads = threads
        self.finished: Message | None = None  # the answer in its final form, once it has one
        self.cancelled = False
        self.conversation_id: int | None = None
        self.stream: StreamingAnswer | None = None
        self.request: EngineRequest | None = None
        self._tools, self._tool_rounds = tools, tool_rounds
        self._tool_task: asyncio.Future[tuple[str, ToolResultPart]] | None = None
        self._round_stats: AnswerStats | None = None  # the last round that made calls: what it took of the context
        self._frame = frame
        self._sources: tuple[SourceRef, ...] = ()
        self._vision = vision  # whether the model in the engine sees the chat's images, and why not
        self._answered = ToolsAnswered()  # this answer's calls and results: a repeat is not run again
        self._remember = remember
        self._builtin_tools = builtin_tools  # the model calls tools: Kestrel's own are offered to it
        self._memories: tuple[int, ...] = ()  # the memories this answer was given, kept on it

    @property
    def running(self) -> bool:
        """True while the engine is writing this answer (not waiting in line)."""
        return self.request is not None and self.request.running

    def cancel(self) -> None:
        """Leave the engine's line, stop between two tokens, or stop waiting for a tool (its
        approval withdrawn); what was written stays."""
        self.cancelled = True  # before the engine is asked: it is never asked
        if self.request is not None:
            self.request.cancel()
        if self._tool_task is not None:
            self._tool_task.cancel()

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
            self._emit(Problem(f"{exc} The answer so far is on screen but was not saved.", "history",
                               conversation_id))

    async def _answer(self, conversation_id: int, prepare: Callable[[int], Awaitable[None]]) -> None:
        conversation = await self._storage.history(HistoryStore.get_conversation, conversation_id)
        history = await self._storage.history(HistoryStore.messages, conversation_id)
        if not self._vision.available and _asks_about_images(history):
            # Nothing is written: the question stays, unanswered, for a model that sees (Regenerate).
            self._emit(Problem(f"{self._vision.reason} Your message is kept: choose a model that sees images for "
                               "this chat, then press Regenerate.", "model", conversation_id))
            return
        stream = self.stream = await StreamingAnswer.start(self._storage, conversation_id)
        self._show(stream.message)
        self._emit(AnswerStarted(stream.message))
        try:
            await prepare(conversation.settings.context_length)
            if self._remember is not None:  # before the documents: they are fitted around the whole system prompt
                memory = await self._remember(conversation, history)
                self._memories = memory.ids
                conversation = replace(conversation, system_prompt=memory.system_prompt(conversation.system_prompt))
            tools = await self._offered(conversation, history)
            if self._frame is not None:
                framed = await self._frame(conversation, history, self._vision.available)
                history, self._sources = list(framed.history), framed.sources
                if framed.problem:  # a collection gone or damaged: the answer goes on without it
                    self._emit(Problem(framed.problem, conversation_id=conversation_id))
            chat = chat_of(conversation.system_prompt, history, see_images=self._vision.available)
            await self._rounds(stream, chat, conversation.settings, tools)
        except EngineError as exc:  # EngineCrashed too: the next send starts a new engine.
            reason = (InterruptReason.ENGINE_DIED if isinstance(exc, EngineCrashed) else
                      InterruptReason.CONTEXT if exc.kind == ErrorKind.CONTEXT else InterruptReason.ENGINE_FAILED)
            self._finish(await self._sourced(await stream.interrupt(AnswerStats(error=exc.message))), reason,
                         exc.message, exc.failure)
            self._emit(Problem(exc.message, "engine" if isinstance(exc, EngineCrashed) else "model", conversation_id))
        except asyncio.CancelledError:
            if not stream.done:
                self._finish(await stream.interrupt(None), InterruptReason.SHUTDOWN)
            raise

    async def _offered(self, conversation: Conversation, history: list[Message]) -> list[ToolInfo]:
        """The tools this chat offers (its servers started now, in the background of the answer),
        then Kestrel's own (memory's remember) when the model's template takes tools: a model
        without tool use is not refused an answer for a tool the person never added."""
        if self._tools is None:
            return []
        servers = conversation.settings.tools
        if servers:
            self._emit(ActivityChanged("Starting tools…", self.conversation_id))
        offered = await self._tools.offered(servers) if servers else []
        if not self._builtin_tools:
            return offered
        return offered + self._tools.builtins_for(conversation, history, {tool.model_name for tool in offered})

    async def _rounds(self, stream: StreamingAnswer, chat: list[ChatMessage], settings: GenerationSettings,
                      tools: list[ToolInfo]) -> None:
        """Answer; when the model calls tools, run them (each once the user allows it), give
        it the results and let it go on, up to `tool_rounds` rounds of calls."""
        listed = json.dumps([tool.for_model() for tool in tools], ensure_ascii=False) if tools else None
        for round_number in range(self._tool_rounds + 1):
            last = round_number == self._tool_rounds  # then the model must answer in words
            shape = AnswerShape(tools=listed, tool_choice="none" if last else "auto") if listed else None
            calls = await self._stream_into(stream, chat, settings, shape)
            if calls is None:
                return
            said = stream.text[stream.round_start:].strip() if stream.round_start is not None else ""
            room = ResultRoom.after_round(self._round_stats, self._engine.client, settings)
            results = await self._run_calls(stream, calls, tools, room)
            if results is None:
                return
            chat.append(ChatMessage(Role.ASSISTANT, said, tool_calls=tuple(calls)))
            chat.extend(ChatMessage(Role.TOOL, result.text, tool_call_id=result.call_id) for result in results)
            stream.next_round()

    async def _run_calls(self, stream: StreamingAnswer, calls: list[ToolCall], tools: list[ToolInfo],
                         room: ResultRoom) -> list[ToolResultPart] | None:
        """Each call shown, asked and run in turn; None if the answer was stopped meanwhile
        (then it is saved as it stands)."""
        assert self._tools is not None and self.conversation_id is not None
        results: list[ToolResultPart] = []
        for call in calls:
            server = next((tool.server for tool in tools if tool.model_name == call.name), "")
            self._show_parts(stream, await stream.add_part(ToolCallPart(call.id, server, call.name, call.arguments)))
            repeated = self._answered.repeat(call)
            if repeated is not None:  # the same call again: the first result, not a second run
                self._show_parts(stream, await stream.add_part(repeated))
                results.append(repeated)
                continue
            self._emit(ActivityChanged(f"Calling {call.name}…", self.conversation_id))
            running = asyncio.ensure_future(self._tools.run(call, tools, conversation_id=self.conversation_id,
                                                            message_id=stream.message_id, room=room))
            self._tool_task = running
            try:
                _, result = await running
            except asyncio.CancelledError:
                if not self.cancelled:
                    raise  # shutting down
                self._finish(await self._complete(stream, AnswerStats(finish_reason=FinishReason.CANCELLED)))
                return None
            finally:
                self._tool_task = None
            self._show_parts(stream, await stream.add_part(result))
            self._answered.ran(call, result)
            results.append(result)
        return results

    async def _complete(self, stream: StreamingAnswer, stats: AnswerStats | None) -> Message:
        return await self._sourced(await stream.finish(stats))

    async def _sourced(self, answer: Message) -> Message:
        """The answer with the sources and the memories it was given, saved on it (the window shows
        them after a restart; an export carries the sources)."""
        if self._memories:
            await self._storage.history(record_memories_used, answer.id, self._memories)
            answer = replace(answer, memories=self._memories)
        if not self._sources:
            return answer
        await self._storage.history(HistoryStore.update_message, answer.id, sources=self._sources)
        return replace(answer, sources=self._sources)

    def _show_parts(self, stream: StreamingAnswer, parts: tuple[Part, ...]) -> None:
        self._emit(ToolPartsChanged(stream.message.conversation_id, stream.message_id, parts))

    async def _stream_into(self, stream: StreamingAnswer, chat: list[ChatMessage], settings: GenerationSettings,
                           shape: AnswerShape | None) -> list[ToolCall] | None:
        """One round of the engine's answer into the stream: the calls it made (the answer
        goes on once they ran), or None when it is finished (and saved)."""
        # A temporary chat leaves no saved state: nothing of it may outlive it, in RAM or on disk.
        request = self.request = self._engine.request(chat, settings, trim_history=True, threads=self._threads,
                                                      shape=shape, keep_state=not is_temporary(self.conversation_id))
        if self.cancelled:
            request.cancel()  # stopped while the history was read: Withdrawn at once
        self._say(stream, thinking=False)
        calls: list[ToolCall] = []
        async with aclosing(request.events()) as events:
            async for event in events:
                if isinstance(event, Delta) and event.tool_call is not None:
                    calls.append(event.tool_call)
                elif isinstance(event, Delta):
                    text = event.text if event.thinking else stream.separated(event.text)
                    await stream.append(text, thinking=event.thinking)
                    if event.thinking != self._shown_thinking:
                        self._say(stream, event.thinking)
                    self._emit(TextGrew(stream.message.conversation_id, stream.message_id, text,
                                        thinking=event.thinking))
                elif isinstance(event, Done):
                    if calls and not self.cancelled and event.finish_reason != FinishReason.CANCELLED:
                        self._round_stats = event.stats
                        return calls
                    await self._no_answer(stream, event.finish_reason)
                    self._finish(await self._complete(stream, event.stats))
                    return None
                elif isinstance(event, Queued):
                    self._emit(event)
                    self._emit(ActivityChanged(f"Waiting for the engine ({event.position} ahead)…",
                                               stream.message.conversation_id))
                elif isinstance(event, Withdrawn):
                    self._finish(await self._complete(stream, AnswerStats(finish_reason=FinishReason.CANCELLED)))
                    return None
        return None

    async def _no_answer(self, stream: StreamingAnswer, reason: FinishReason | None) -> None:
        """After tools' results the model wrote nothing (0 tokens, or only blank lines): say so,
        with what the tools returned, rather than leave an empty answer."""
        if (not self._answered.any or self.cancelled or reason == FinishReason.CANCELLED
                or stream.round_start is None or stream.text[stream.round_start:].strip()):
            return
        text = stream.separated(self._answered.no_answer())
        await stream.append(text)
        self._emit(TextGrew(stream.message.conversation_id, stream.message_id, text))

    @property
    def activity_words(self) -> str:
        """What the status line says of this answer now."""
        return self._pace_words() or (THINKING if self._shown_thinking else WRITING)

    def _say(self, stream: StreamingAnswer, thinking: bool) -> None:
        """The status line: "Thinking…" only while a reasoning model thinks, else "Writing…"
        (or the pace's words: paused, gently)."""
        self._shown_thinking = thinking
        self._emit(ActivityChanged(self.activity_words, stream.message.conversation_id))

    def _finish(self, message: Message, reason: InterruptReason | None = None, detail: str = "",
                failure: Failure | None = None) -> None:
        self.finished = message
        self._settle(message)
        if reason is None:
            self._emit(AnswerFinished(message))
        else:
            self._emit(AnswerInterrupted(message, reason, detail, failure))


def chat_of(system_prompt: str, history: list[Message], *, see_images: bool = True) -> list[ChatMessage]:
    """The conversation as the engine sees it: no empty or unfinished messages; a turn that
    used tools as the model wrote it, each round's calls followed by their results. A user
    turn carries its images on every answer (see_images), or, for a model that cannot see
    them, says in its text that there were images it is not shown. The engine takes at most
    PROMPT_IMAGES in one prompt: the newest turns keep theirs (a turn all of them or none),
    and the older ones get the same words instead (attached_images.turns_with_images, the
    rule the documents' fit counts by too)."""
    chat = [ChatMessage(Role.SYSTEM, system_prompt)] if system_prompt.strip() else []
    shown = turns_with_images(history, see_images=see_images)
    for number, message in enumerate(history):
        if message.role == Role.SYSTEM or message.state == MessageState.STREAMING:
            continue
        if message.parts:
            chat.extend(_rounds_of(message))
        elif message.images and number in shown:
            chat.append(ChatMessage(message.role, message.text, message.thinking,
                                    images=tuple(image.data for image in message.images)))
        elif message.images:
            chat.append(ChatMessage(message.role, f"{message.text}\n\n{unseen_note(message.images)}", message.thinking))
        elif message.text:
            chat.append(ChatMessage(message.role, message.text, message.thinking))
    return chat


def _asks_about_images(history: list[Message]) -> bool:
    """The last user message carries images: the answer would be about what the model cannot see."""
    last = next((m for m in reversed(history) if m.role == Role.USER), None)
    return last is not None and bool(last.images)


def _rounds_of(message: Message) -> list[ChatMessage]:
    turns: list[ChatMessage] = []
    for number, round_ in enumerate(tool_rounds(message.parts)):
        answered = {result.call_id for result in round_.results}
        # A call stopped before its result is left out: the model never saw it come back.
        calls = tuple(ToolCall(i, call.call_id, call.name, call.arguments)
                      for i, call in enumerate(c for c in round_.calls if c.call_id in answered))
        if not calls and not round_.text:
            continue
        turns.append(ChatMessage(Role.ASSISTANT, round_.text, message.thinking if number == 0 else "",
                                 tool_calls=calls))
        turns.extend(ChatMessage(Role.TOOL, result.text, tool_call_id=result.call_id) for result in round_.results)
    return turns
