"""The API server's answers: which model, its context, a place in the engine's line, and the log."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Protocol

from app.core.attachments import AttachedImage
from app.core.generation import GenerationSettings
from app.core.paths import data_paths
from app.engine.failures import BadShape, PromptTooLong, ShapePart
from app.engine.protocol import ChatMessage, Delta, Done, ToolCall
from app.core.conversation import Role
from app.library.installed import InstalledModel
from app.library.servers.records import ModelAbility, RemoteModel
from app.service.api.api_context import ContextPlanner
from app.service.api.api_repeats import CopyHold, RepeatWatch, asked_again, both, without_calls
from app.service.api.api_images import refuse_unseeing, seen_images
from app.service.api.api_embeddings import ApiEmbeddings, no_embedding_model
from app.service.api.api_model_facts import ModelFacts, model_facts
from app.service.api.api_voice import ApiVoice
from app.service.api.api_types import ApiAsk, ApiModel, ApiRefused, EmbeddingAsk, Embeddings, Started

__all__ = ["SERVING", "ApiAnswers", "ApiAsk", "ApiModel", "ApiRefused", "EmbeddingAsk", "Embeddings", "ModelFacts",
           "Started"]
from app.service.chats.conversations import Conversations
from app.service.models.engine_errors import EngineCrashed, EngineError
from app.service.models.engine_queue import Withdrawn
from app.service.events import ActivityChanged, ApiRequestLogged, Event, ModelState, Queued, RequestRecord
from app.service.models.model_session import ModelSession
from app.service.settings_keeper import SettingsKeeper

SERVING = "Serving an API request"
RECENT = 100
# A model switched by a window chat between this request's load and its turn: try again.
_SWITCH_TRIES = 3
# thinking: Ollama's think (false turns a switchable reasoning model's thinking off, as the window can).
_SETTINGS = ("temperature", "top_p", "top_k", "min_p", "repeat_penalty", "max_tokens", "seed", "thinking")


class RemoteChoice(Protocol):
    """What the API needs of the servers the person added (RemoteServers)."""

    async def for_api(self) -> tuple[RemoteModel, ...]: ...

    def named(self, model_id: str) -> InstalledModel | None: ...


def _chats(model: RemoteModel) -> bool:
    """Not a model its server says only embeds (it could not answer a chat)."""
    return not (model.abilities_known and model.abilities == frozenset({ModelAbility.EMBEDDINGS}))


def _remote_entry(model: RemoteModel, loaded: InstalledModel | None) -> ApiModel:
    """A server's model as the API lists it: its id SERVER/MODEL ("studio-pc/qwen2.5:7b"), named with its server."""
    return ApiModel(model.id, f"{model.name} on {model.server}", model.context_length, "remote",
                    loaded is not None and loaded.id == model.id, 0, ModelAbility.VISION in model.abilities,
                    size=model.size)


def _sampling(settings: GenerationSettings) -> dict[str, Any]:
    """The settings a request may set (_SETTINGS), as the model answers unless it does."""
    return {name: getattr(settings, name) for name in _SETTINGS}


async def _after(first: Delta | Done, events: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """The answer's first event, then the rest of its events up to its Done."""
    yield first
    if isinstance(first, Done):
        return
    async for event in events:
        yield event
        if isinstance(event, Done):
            return


class ApiAnswers:
    """Answers API requests through the model session's engine line, beside the window's chats.

    A request names a model (loaded just in time with its own defaults, unless the user
    chose "only the loaded model"), may ask for a longer context (reloaded when it fits
    memory, else refused with both numbers), and waits its turn in the engine's line; at
    most `max_waiting` wait, the next gets 503. Closing an answer's iterator (a client
    that went away) cancels it in the engine. Nothing is written to the chat history
    unless the user chose to keep API conversations as chats (keep_as_chats).
    """

    def __init__(self, session: ModelSession, keeper: SettingsKeeper, conversations: Conversations,
                 emit: Callable[[Event], None], *, spawn: Callable[..., asyncio.Task[Any]],
                 chats_busy: Callable[[], bool], embeddings: ApiEmbeddings | None = None,
                 remember: Callable[[Sequence[ChatMessage], int], Awaitable[tuple[ChatMessage, ...]]] | None = None,
                 remote: RemoteChoice | None = None, voice: ApiVoice | None = None) -> None:
        """embeddings: /v1/embeddings' side (None: no embedding model, as with no documents service).
        remember: a request's messages with the person's memories put in, when the settings say the API
        uses memory (MemoryBook.for_api; off by default); a chat kept from the request keeps none of them.
        remote: the models on the servers the person added, listed and named as SERVER/MODEL (None: none).
        voice: the audio endpoints' transcriptions and speeches (None: made here, for tests that build no root)."""
        self.voice = voice or ApiVoice(data_paths().data / "speech")
        self._remember = remember
        self._remote = remote
        self._session, self._keeper, self._emit, self._spawn = session, keeper, emit, spawn
        self._embeddings = embeddings
        self._conversations = conversations
        self._chats_busy = chats_busy
        self._context = ContextPlanner(session, keeper)
        self._waiting = 0
        self._running = 0
        self._load: tuple[str, asyncio.Task[Any]] | None = None  # the last load a request started
        self.recent: deque[RequestRecord] = deque(maxlen=RECENT)

    @property
    def busy(self) -> bool:
        """True while an API answer runs or waits (nothing unloads or reloads then)."""
        return bool(self._waiting or self._running)

    # --- models -------------------------------------------------------------------------

    async def models(self, *, described: bool = False) -> list[ApiModel]:
        """The installed chat models (not the missing ones, not embedding models), the loaded one marked;
        described: with what each file states and the sampling it answers with (Ollama's /api/tags, /api/show)."""
        def read() -> tuple[list[InstalledModel], dict[str, int | None], dict[str, ModelFacts]]:
            installed = [m for m in self._session.setup.library.chat_models() if not m.missing]
            facts = {m.id: model_facts(m) for m in installed} if described else {}
            return installed, {m.id: self._context.trained(m) for m in installed}, facts

        installed, trained, facts = await asyncio.to_thread(read)
        loaded = self._session.model if self._session.state == ModelState.READY else None
        base = self._keeper.settings.generation
        local = [ApiModel(m.id, m.title, trained[m.id], str(m.format), loaded is not None and loaded.id == m.id,
                          int(m.added), m.vision, size=m.size, sha256=m.sha256, facts=facts.get(m.id),
                          sampling=_sampling(m.defaults.generation(base)) if described else {})
                 for m in installed]
        remote = await self._remote.for_api() if self._remote is not None else ()
        return local + [_remote_entry(m, loaded) for m in remote if _chats(m) and m.id not in {e.id for e in local}]

    async def _target(self, name: str | None) -> InstalledModel:
        session = self._session
        if not name:
            chosen = session.model or session.app_model
            if chosen is None:
                default = self._keeper.settings.default_model
                chosen = await asyncio.to_thread(session.setup.library.get, default) if default else None
            if chosen is None:
                raise ApiRefused(400, "No model is loaded and none is chosen as the default: name one in "
                                      "\"model\" (GET /v1/models lists them), or add one in Kestrel's model "
                                      "manager.", param="model", code="model_not_found")
            return chosen
        installed = await asyncio.to_thread(session.setup.library.list)
        wanted = name.strip()
        found = next((m for m in installed if m.id == wanted), None) or next(
            (m for m in installed if m.title.casefold() == wanted.casefold()), None)
        if found is None and self._remote is not None:
            found = await asyncio.to_thread(self._remote.named, wanted)  # SERVER/MODEL: the server says at load
        if found is None:
            raise ApiRefused(404, f"The model {name!r} is not installed in Kestrel. GET /v1/models lists the "
                                  f"ones that are; add others in Kestrel's model manager.",
                             param="model", code="model_not_found")
        if found.missing:
            raise ApiRefused(400, f"{found.title} is not at {found.path} now: reconnect the drive it is on, "
                                  f"or name another model.", param="model", code="model_not_found")
        if not found.chats:
            raise ApiRefused(400, f"{found.title} is an embedding model: it turns text into vectors for "
                                  f"searching documents and cannot answer. Name a chat model (GET /v1/models "
                                  f"lists them).", param="model", code="model_not_found")
        return found

    # --- answering ----------------------------------------------------------------------

    async def answer(self, ask: ApiAsk) -> AsyncIterator[Started | Delta | Done]:
        """Started, then the engine's Delta events and one Done; ApiRefused before Started."""
        server = self._keeper.settings.server
        if self._waiting >= server.max_waiting and (self._running or self._session.engine.busy):
            raise ApiRefused(503, f"Kestrel is busy: {self._waiting} requests already wait for the model "
                                  f"(at most {server.max_waiting}, a setting). Try again shortly.",
                             code="server_busy", retry_after=5)
        target = await self._target(ask.model)
        # The loaded model stays the one to answer with after an idle unload or a dead engine.
        if server.only_loaded_model and not self._holds(target):
            loaded = self._session.model.title if self._session.model is not None else "none"
            raise ApiRefused(400, f"Kestrel answers only with the loaded model ({loaded}); {target.title} is "
                                  f"not loaded. Name the loaded model, or turn off \"Only the loaded model\" in "
                                  f"Kestrel's settings.", param="model", code="model_not_loaded")
        settings = self._settings(target, ask.settings)
        if ask.images:  # before any image is checked: the model must see
            refuse_unseeing(target, self._session.loaded if self._is_loaded(target) else None)
        self._waiting += 1
        started = False
        written: list[str] = []
        kept: Mapping[int, tuple[AttachedImage, ...]] = {}
        try:
            if ask.images:
                # One image check at a time, the window's included (attached_images.checked_in_turn).
                seen = await seen_images(ask)
                ask, kept = dataclasses.replace(ask, messages=seen.messages, images=()), seen.kept
            async for event in self._answer(ask, target, settings):
                if not started:
                    started = True
                    self._waiting -= 1
                    self._running += 1
                    self._session.set_serving(True)
                    self._emit(ActivityChanged(SERVING))
                if isinstance(event, Delta) and not event.thinking:
                    written.append(event.text)
                elif isinstance(event, Done) and self._keeper.settings.server.keep_as_chats:
                    self._spawn(self._keep(ask, target, "".join(written), event, kept))
                yield event
        finally:
            if started:
                self._running -= 1
                if not self._running:
                    self._session.set_serving(False)
                    if not self._chats_busy():
                        self._emit(ActivityChanged("Idle"))
            else:
                self._waiting -= 1
            self._session.idle_timer.restart()

    async def _answer(self, ask: ApiAsk, target: InstalledModel,
                      settings: GenerationSettings) -> AsyncIterator[Started | Delta | Done]:
        asked_context = self._context.checked(ask.context_length)
        if self._remember is not None and ask.shape.prompt is None:
            ask = dataclasses.replace(ask, messages=await self._remember(ask.messages, settings.context_length))
        for _ in range(_SWITCH_TRIES):
            await self._ready(target)
            if any(message.images for message in ask.messages):  # its projector must have loaded with it
                refuse_unseeing(target, self._session.loaded)
            if asked_context is not None:
                await self._context.ensure(target, asked_context, prompt_tokens=None)
            # The same thread advisor as the window's and the CLI's answers: the cores other programs leave free now.
            request = self._session.engine.request(ask.messages, settings, stop=ask.stop, shape=ask.shape,
                                                   threads=self._session.answer_threads(self._keeper.settings))
            async with aclosing(request.events()) as events:
                try:
                    first = await self._first(events, target)
                except EngineError as exc:
                    if isinstance(exc.failure, PromptTooLong):
                        await self._context.ensure(target, None, prompt_tokens=exc.failure.prompt_tokens,
                                                   room=settings.max_tokens)
                        continue
                    raise self._engine_refusal(exc, ask) from exc
                if first is None:
                    continue  # another model took the engine before this turn: load this one again
                loaded = self._session.client.loaded
                yield Started(target.id, loaded.context_length if loaded is not None else 0)
                watch = RepeatWatch(ask.messages, ask.shape)  # a call the client already ran is not sent again
                done: Done | None = None
                try:
                    async for event in _after(first, events):
                        if isinstance(event, Done):
                            done = event
                        elif isinstance(event, Delta) and (passed := watch.passes(event)) is not None:
                            yield passed
                except EngineError as exc:
                    raise self._engine_refusal(exc, ask) from exc
                if done is None:
                    return
                self._session.learn_threads(done.stats)
                result_at = watch.ask_again(done)
                if result_at is None or watch.repeated is None:
                    yield done
                    return
            # Left the line when the iterator is closed (a client that went away cancels), and
            # out of it before the second try joins it again.
            async for event in self._asked_again(ask, target, settings, result_at, watch.repeated, done):
                yield event
            return
        raise ApiRefused(503, "The model was switched by another request each time this one came to its "
                              "turn. Try again.", code="server_busy", retry_after=2)

    async def _asked_again(self, ask: ApiAsk, target: InstalledModel, settings: GenerationSettings, result_at: int,
                           repeated: ToolCall, first: Done) -> AsyncIterator[Delta | Done]:
        """The answer asked for once more after it only repeated a call whose result the request
        holds: no tools this time, a note after that result. Its words, or none (the first
        answer's end: an empty answer, never words made up for the model)."""
        request = self._session.engine.request(asked_again(ask.messages, result_at, repeated), settings,
                                               stop=ask.stop, shape=without_calls(ask.shape),
                                               threads=self._session.answer_threads(self._keeper.settings))
        hold = CopyHold(ask.shape)
        async with aclosing(request.events()) as events:
            try:
                async for event in events:
                    if isinstance(event, Withdrawn):
                        break
                    if not isinstance(event, (Delta, Done)):
                        continue
                    asked = self._session.client.load_request
                    if asked is None or asked.model_path != target.location:
                        break  # a window chat's model took the engine meanwhile: not this model's answer
                    if isinstance(event, Done):
                        self._session.learn_threads(event.stats)
                        for held in hold.rest():
                            yield held
                        yield dataclasses.replace(event, stats=both(first.stats, event.stats))
                        return
                    for sent in hold.passes(event):
                        yield sent
            except EngineError:
                pass  # e.g. a template that takes no tool turns without tools: the empty answer stands
        yield first

    async def _first(self, events: AsyncIterator[Any], target: InstalledModel) -> Delta | Done | None:
        """The first engine event, after the waiting; None if the engine held another model
        by then (a window chat's own, loaded while this request waited)."""
        async for event in events:
            if isinstance(event, Queued):
                continue
            if isinstance(event, Withdrawn):
                raise ApiRefused(503, "The request left the line before its turn.", code="server_busy")
            if isinstance(event, (Delta, Done)):
                asked = self._session.client.load_request
                if asked is None or asked.model_path != target.location:
                    return None
                return event
        raise ApiRefused(500, "The engine ended the answer without a word; please report this.",
                         code="engine_error")

    def _is_loaded(self, target: InstalledModel) -> bool:
        model = self._session.model
        return self._session.state == ModelState.READY and model is not None and model.id == target.id

    def _holds(self, target: InstalledModel) -> bool:
        """The session's model is target, loaded or not: unloaded when idle, or its engine died."""
        model = self._session.model
        return model is not None and model.id == target.id

    async def _ready(self, target: InstalledModel) -> None:
        """The target loaded (just in time, with its own defaults), or ApiRefused saying why not.

        One load per request. A session that failed (its engine died, or a load failed for
        a reason that may be gone: memory, a file since replaced) is loaded again, so one
        crash costs one answer, not every later one. A load of the target that failed while
        this request waited for it counts as its try: a broken file is refused with its
        reason after one quick load, never in a loop.
        """
        session = self._session
        tried = False
        while not self._is_loaded(target):
            if session.state in (ModelState.LOADING, ModelState.INSTALLING):
                tried = tried or self._holds(target)
                await session.moves()
                continue
            if tried:
                raise ApiRefused(500, f"{target.title} could not be loaded: {session.detail}",
                                 param="model", code="model_load_failed")
            tried = True
            load = self._load
            # Requests that come together share one load: it says LOADING only once it runs.
            if load is None or load[1].done() or load[0] != target.id:
                app_model = session.app_model
                # A task of its own: a client that goes away must not cancel a load half done.
                self._load = (target.id, self._spawn(session.load_model(
                    target, for_chat=app_model is None or app_model.id != target.id)))
            await session.moves()

    def _settings(self, target: InstalledModel, asked: Mapping[str, Any]) -> GenerationSettings:
        base = target.defaults.generation(self._keeper.settings.generation)
        chosen = {name: value for name, value in asked.items() if name in _SETTINGS and value is not None}
        try:
            return dataclasses.replace(base, **chosen).validated()
        except ValueError as exc:
            name = next((n for n in chosen if str(exc).startswith(n)), None)
            raise ApiRefused(400, str(exc), param=name) from exc

    @staticmethod
    def _engine_refusal(exc: EngineError, ask: ApiAsk) -> ApiRefused:
        failure = exc.failure
        if isinstance(failure, BadShape) and failure.part == ShapePart.JSON_SCHEMA and ask.schema_param:
            return ApiRefused(400, f"{ask.schema_param}: {exc.message}", param=ask.schema_param)
        if isinstance(exc, EngineCrashed):
            return ApiRefused(503, f"{exc.message} Send the request again: the next one starts a new engine.",
                              code="engine_error", retry_after=1)
        return ApiRefused(400 if exc.kind.value in ("context_overflow", "unsupported", "no_vision", "bad_image") else 500, exc.message,
                          code="engine_error")

    async def _keep(self, ask: ApiAsk, target: InstalledModel, answer: str, done: Done,
                    images: Mapping[int, tuple[AttachedImage, ...]]) -> None:
        """The exchange as a chat of its own (the user chose to keep API conversations), each user
        turn with its checked images (images: by the turn's index in ask.messages)."""
        turns = [(m.role, m.content) for m in ask.messages] if ask.shape.prompt is None else \
            [(Role.USER, ask.shape.prompt)]
        asked = next((text for role, text in reversed(turns) if role == Role.USER and text.strip()), "")
        title = "API: " + (asked.strip().splitlines()[0][:40] if asked.strip() else ask.endpoint)
        await self._conversations.keep_exchange(title, turns, answer, done.stats, target.id,
                                                images=images if ask.shape.prompt is None else None)

    # --- embeddings -----------------------------------------------------------------------

    async def embed(self, ask: EmbeddingAsk) -> Embeddings:
        """/v1/embeddings: vectors from the embedding model the documents use, or ApiRefused."""
        if self._embeddings is None:
            raise await asyncio.to_thread(no_embedding_model)
        return await self._embeddings.embed(ask)

    # --- the log ------------------------------------------------------------------------

    def log(self, record: RequestRecord) -> None:
        """A finished request, for the window's list of recent requests."""
        self.recent.append(record)
        self._emit(ApiRequestLogged(record))

    @property
    def recent_requests(self) -> Sequence[RequestRecord]:
        return tuple(self.recent)
