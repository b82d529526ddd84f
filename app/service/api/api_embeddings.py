"""The API server's embeddings: vectors from the embedding model the documents use, in turn with indexing.

Why the documents' model and process rather than the chat engine's line: the chat engine holds
one chat model, and an embedding model loaded there would unload it; the documents already keep
the embedding model in a process of its own (app/documents/embedding.py), so an API request uses
that same process, one block of texts a turn, between indexing's batches (EmbeddingTurns).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from app.core.server_settings import ServerSettings
from app.core.units import human_size
from app.library.catalog import embedding_entries, load_catalog
from app.library.installed import InstalledModel
from app.library.model_files.model_purpose import ModelPurpose
from app.library.models import ModelLibrary
from app.service.api.api_types import ApiRefused, EmbeddingAsk, Embeddings
from app.service.documents.embedding_turns import EmbeddingClosed, ReportingEmbedder

if TYPE_CHECKING:
    from app.documents.embedding import Embedded
    from app.documents.search import Embedder

# OpenAI's own limit on one request's array of inputs.
MAX_INPUTS = 2048
# All inputs together: about 250,000 tokens of English prose, under OpenAI's 300,000-token sum.
# all-MiniLM-L6-v2 on a busy 2-core machine makes ~560 tokens a second (docs/benchmarks.md), so
# such a request takes minutes there: a bound on the work one request may ask for, not a goal.
MAX_CHARACTERS = 1_000_000
# Texts one turn embeds: indexing's batch (EMBED_BATCH), so each side waits at most one of the other's.
TEXTS_PER_TURN = 16


class EmbeddingSource(Protocol):
    """What the API needs of the documents' embedding model (DocumentsService gives it)."""

    async def embedding_model_in_use(self) -> InstalledModel | None: ...

    def embedding_turn(self, path: Path) -> AbstractContextManager[Embedder]: ...


def no_embedding_model(library: ModelLibrary | None = None) -> ApiRefused:
    """The 400 without an embedding model, saying how to get the catalog's."""
    usable = [m for m in library.embedding_models() if not m.missing] if library is not None else []
    if usable:  # installed, but the one chosen for the documents is not there
        return ApiRefused(400, "The embedding model chosen for documents is not installed or not there now, so "
                               "Kestrel cannot make embeddings. Choose an installed one for the documents (kestrel "
                               f"docs model {usable[0].id}, or the Documents window); /v1/embeddings answers with it.",
                          param="model", code="model_not_found")
    offered = embedding_entries(load_catalog())
    if offered:
        entry = offered[0]
        size = f", {human_size(entry.size)}" if entry.size else ""
        get = (f"install the catalog's embedding model, {entry.name}{size}: kestrel models get {entry.id}, or "
               "\"Download it\" on the Documents window's \"Search by meaning\" line")
    else:
        get = "add an embedding GGUF (such as all-MiniLM-L6-v2) with kestrel models add PATH"
    return ApiRefused(400, f"No embedding model is installed, and Kestrel's chat models do not make embeddings. To "
                           f"get one, {get}; /v1/embeddings then answers with it, as document search does.",
                      param="model", code="model_not_found")


class ApiEmbeddings:
    """Answers /v1/embeddings with the embedding model the documents use (whatever model the
    request names, unless it names another installed model, which is refused with the one to
    name). Bounded: MAX_INPUTS inputs, MAX_CHARACTERS in all, none empty, none past the model's
    context (a 400 names it: cutting it would change its meaning unasked); at most
    max_waiting requests wait, the next gets 503. A request whose client went away stops
    after the block in progress."""

    def __init__(self, source: EmbeddingSource, library: ModelLibrary,
                 server_settings: Callable[[], ServerSettings]) -> None:
        self._source, self._library, self._server_settings = source, library, server_settings
        self._open = 0

    async def embed(self, ask: EmbeddingAsk) -> Embeddings:
        """The vectors, or ApiRefused saying what to change."""
        _check_bounds(ask.texts)
        model = await self._source.embedding_model_in_use()
        if model is None:
            raise await asyncio.to_thread(no_embedding_model, self._library)
        await self._check_name(ask.model, model)
        waiting = self._server_settings().max_waiting
        if self._open > waiting:
            raise ApiRefused(503, f"Kestrel is busy: {self._open} embedding requests already run or wait (at most "
                                  f"{waiting} wait, a setting). Try again shortly.", code="server_busy",
                             retry_after=5)
        self._open += 1
        try:
            return await self._embed(ask, model)
        finally:
            self._open -= 1

    async def _embed(self, ask: EmbeddingAsk, model: InstalledModel) -> Embeddings:
        rows: list[bytes] = []
        width = tokens = 0
        for first in range(0, len(ask.texts), TEXTS_PER_TURN):
            width, embedded = await asyncio.to_thread(self._turn, model, ask.texts[first:first + TEXTS_PER_TURN])
            if ask.dimensions is not None and ask.dimensions != width:
                raise ApiRefused(400, f"{model.title} makes vectors of {width} dimensions and cannot make them "
                                      f"{ask.dimensions} wide (it was not trained to be shortened). Leave "
                                      f"dimensions out, or send {width}.", param="dimensions")
            if embedded.truncated:
                cut = embedded.truncated[0]
                raise ApiRefused(400, f"input[{first + cut.index}] is {cut.tokens:,} tokens long; {model.title} reads "
                                      f"at most {cut.kept:,} tokens of one input. Split it into shorter inputs.",
                                 param="input")
            rows += [row.astype("<f4").tobytes() for row in embedded.vectors]
            tokens += sum(embedded.tokens)
        return Embeddings(model.id, width, tuple(rows), prompt_tokens=tokens)

    def _turn(self, model: InstalledModel, texts: Sequence[str]) -> tuple[int, Embedded]:
        """On a worker thread: one block in the model's turn (the model's width with it)."""
        from app.documents.embedding import EmbeddingError

        try:
            with self._source.embedding_turn(model.path) as embedder:
                if not isinstance(embedder, ReportingEmbedder):
                    raise TypeError(f"{type(embedder).__name__} cannot report its vectors' width and cut texts")
                return embedder.dimensions, embedder.embed_report(texts)
        except EmbeddingError as exc:
            raise ApiRefused(500, str(exc), code="embedding_error") from exc
        except EmbeddingClosed as exc:
            raise ApiRefused(503, str(exc), code="server_busy") from exc

    async def _check_name(self, name: str | None, model: InstalledModel) -> None:
        """A name that is another installed model is refused; any other name (an OpenAI model's, which
        clients send by habit) gets the model in use, which the answer names."""
        wanted = (name or "").strip()
        if not wanted or wanted == model.id or wanted.casefold() == model.title.casefold():
            return
        installed = await asyncio.to_thread(self._library.list)
        other = next((m for m in installed if m.id == wanted), None) or next(
            (m for m in installed if m.title.casefold() == wanted.casefold()), None)
        if other is None:
            return
        if other.purpose is not ModelPurpose.EMBEDDING:
            raise ApiRefused(400, f"{other.title} is a chat model: it makes no embeddings. /v1/embeddings answers "
                                  f"with {model.title}, the embedding model the documents use: name {model.id} or "
                                  "leave model empty.", param="model", code="model_not_found")
        raise ApiRefused(400, f"/v1/embeddings answers with {model.title} ({model.id}), the embedding model the "
                              f"documents use, not {other.title}. Name {model.id}, or choose {other.id} for the "
                              f"documents first (kestrel docs model {other.id}, or the Documents window).",
                         param="model", code="model_not_found")


def _check_bounds(texts: tuple[str, ...]) -> None:
    if not texts:
        raise ApiRefused(400, "input is empty: send a string, or an array of strings, to embed.", param="input")
    if len(texts) > MAX_INPUTS:
        raise ApiRefused(400, f"input holds {len(texts):,} strings; at most {MAX_INPUTS:,} are accepted in one "
                              "request. Send them in several requests.", param="input")
    empty = next((index for index, text in enumerate(texts) if not text), None)
    if empty is not None:
        raise ApiRefused(400, f"input[{empty}] is an empty string, which has no meaning to embed.",
                         param=f"input[{empty}]")
    total = sum(len(text) for text in texts)
    if total > MAX_CHARACTERS:
        raise ApiRefused(400, f"input holds {total:,} characters in all; at most {MAX_CHARACTERS:,} are accepted "
                              "in one request. Send them in several requests.", param="input")
