"""The embedding model's one process, used in turns by indexing, search and the API server: first come, first served.

Why turns and not the process's own lock: indexing asks for a batch again the moment the last
one is stored, and a plain lock goes to whichever thread grabs it first, so an API request could
wait behind a whole collection. Here each caller queues for one batch at a time, so an API
request waits at most one indexing batch, and indexing at most one block of a request.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # numpy comes with them: imported where vectors are made, not when the service starts
    from app.documents.embedding import Embedded
    from app.documents.search import Embedder


@runtime_checkable
class ReportingEmbedder(Protocol):
    """An Embedder that also says its width and which texts it cut (EmbeddingProcess does; the
    API server needs both, indexing neither)."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...

    @property
    def dimensions(self) -> int: ...

    def embed_report(self, texts: Sequence[str]) -> Embedded: ...


class EmbeddingClosed(Exception):
    """Kestrel is closing: the embedding model takes no more turns."""


class EmbeddingTurns:
    """Owns the process of the model in use (started on the first turn, by `make`) and hands it
    out one turn at a time, in the order turns were asked for. A turn for another model's file
    ends the process and starts that model's."""

    def __init__(self, make: Callable[[Path], Embedder]) -> None:
        self._make = make
        self._held: tuple[Path, Embedder] | None = None
        self._queue: deque[object] = deque()
        self._changed = threading.Condition()
        self._closed = False

    @contextmanager
    def turn(self, path: Path) -> Iterator[Embedder]:
        """The process of the model at `path`, for this caller alone until the block ends."""
        with self._place():
            if self._closed:
                raise EmbeddingClosed("Kestrel is closing: the embedding model takes no more requests.")
            held = self._held
            if held is None or held[0] != path:
                self._end()
                held = self._held = (path, self._make(path))
            yield held[1]

    @property
    def in_line(self) -> int:
        """Callers holding or waiting for a turn now."""
        with self._changed:
            return len(self._queue)

    def embedder_for(self, path: Path) -> Embedder:
        """An Embedder that takes a turn for each call (a batch of indexing, a search's question)."""
        return _InTurns(self, path)

    def release(self) -> None:
        """End the process (after a failure, or with no model chosen): the next turn starts a new one."""
        with self._place():
            self._end()

    def close(self) -> None:
        """End the process for good: no turn starts from now on, the one in progress ends first."""
        with self._changed:
            self._closed = True
        with self._place():
            self._end()

    @contextmanager
    def _place(self) -> Iterator[None]:
        """Wait for this caller's place in the line, hold it for the block, then pass it on."""
        mine = object()
        with self._changed:
            self._queue.append(mine)
            try:
                while self._queue[0] is not mine:
                    self._changed.wait()
            except BaseException:  # a waiter interrupted leaves the line, or every later one waits for ever
                self._queue.remove(mine)
                self._changed.notify_all()
                raise
        try:
            yield
        finally:
            with self._changed:
                self._queue.popleft()
                self._changed.notify_all()

    def _end(self) -> None:
        held, self._held = self._held, None
        close = getattr(held[1], "close", None) if held is not None else None
        if close is not None:
            close()


class _InTurns:
    """Embedder over EmbeddingTurns: each embed() is one turn."""

    def __init__(self, turns: EmbeddingTurns, path: Path) -> None:
        self._turns, self._path = turns, path

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        with self._turns.turn(self._path) as embedder:
            return embedder.embed(texts)
