"""The memories' vectors for selection by meaning: a question's vector, and the memories' as one matrix kept between answers."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.core.store.history_file import HistoryFile
from app.core.store.memories import enabled_memory_vectors, memory_vectors_changes

if TYPE_CHECKING:  # numpy comes with the first ranking, not with the service's start
    import numpy as np
    import numpy.typing as npt

    # The documents' embedding model, reached through their service (DocumentsService.embed_for_memory): the
    # model's id and one unit vector a text; only the id when no text is given; None without a usable model.
    EmbedTexts = Callable[[Sequence[str]], Awaitable[tuple[str, npt.NDArray[np.float32]] | None]]


@dataclass(frozen=True)
class MemoryQuery:
    """A question's vector, and the model that made it: only that model's vectors are compared with it."""

    model: str
    vector: Any  # numpy float32, one row


def vector_bytes(vector: Any) -> bytes:
    """A vector as the history keeps it: unit length, little-endian float32."""
    import numpy as np

    row = np.asarray(vector, dtype=np.float32)
    return (row / (float(np.linalg.norm(row)) or 1.0)).astype("<f4").tobytes()


class MemoryVectors:
    """The vectors of one model's memories that are on, as one float32 matrix in memory, read again only when
    the history's change counter moved (reading 10,000 costs more than a whole selection's budget).

    Used on the storage's writer thread; forget() may come from the event loop, hence the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded: tuple[int, str, int] | None = None  # (the store's id, the model, its change count)
        self._ids: Any = None
        self._matrix: Any = None

    def nearest(self, store: HistoryFile, query: MemoryQuery, count: int) -> list[tuple[int, float]]:
        """The ids of the `count` memories closest to the query by cosine, closest first, with their scores;
        none when no memory has a vector of the query's model (or one of another width)."""
        import numpy as np

        with self._lock:
            self._refresh(store, query.model)
            ids, matrix = self._ids, self._matrix
        vector = np.asarray(query.vector, dtype=np.float32)
        if not len(ids) or count <= 0 or vector.shape != (matrix.shape[1],):
            return []
        vector = vector / (float(np.linalg.norm(vector)) or 1.0)
        # einsum, as VectorStore.nearest (app/documents/search.py): a matrix-vector product is bound by memory.
        scores = np.einsum("ij,j->i", matrix, vector)
        count = min(count, len(scores))
        best = np.argpartition(-scores, count - 1)[:count]
        best = best[np.argsort(-scores[best], kind="stable")]
        return [(int(ids[i]), float(scores[i])) for i in best]

    def forget(self) -> None:
        """Drop the matrix (memories were forgotten): the next ranking reads it again."""
        with self._lock:
            self._loaded, self._ids, self._matrix = None, None, None

    def _refresh(self, store: HistoryFile, model: str) -> None:
        import numpy as np

        stamp = (id(store), model, memory_vectors_changes(store))
        if self._loaded == stamp:
            return
        rows = enabled_memory_vectors(store, model)
        width = len(rows[0][1]) // 4 if rows else 0
        rows = [row for row in rows if len(row[1]) == 4 * width]  # one of another width: not this model's
        self._ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        self._matrix = (np.frombuffer(b"".join(row[1] for row in rows), dtype="<f4").reshape(len(rows), width)
                        if rows else np.zeros((0, 0), dtype=np.float32))
        self._loaded = stamp
