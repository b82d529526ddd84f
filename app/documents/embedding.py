"""Embeddings from an embedding GGUF, computed by llama.cpp in a child process of their own.

Why a child process: llama.cpp aborts the whole process on some bad inputs (a GGML_ASSERT
in a kernel, a model file that lies about its tensors), and indexing a folder runs for
minutes beside a chat. In its own process a crash or a hang costs the index one batch,
reported as an EmbeddingError, never the window or the chat engine; the chat engine's
process keeps its one model and its memory plan. See docs/design.md, "Embeddings".
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np

from app.core.children.python_child import PythonChild, start_python_child
from app.documents import embed_worker as w

log = logging.getLogger(__name__)

# Texts sent to the child in one request: bounds the pipe message and how much work one
# timeout covers; llama.cpp then packs them into batches of up to the context's tokens.
# Measured (docs/benchmarks.md, "Indexing and embedding speed"): all-MiniLM-L6-v2 f16 on one
# thread of a busy 2-core machine made 1.6 chunks of ~350 tokens a second, and 64 texts on two
# contended threads took more than 120 s: 16 a request is ~10 s there, a twelfth of the limit.
DEFAULT_TEXTS_PER_REQUEST = 16
# Loading a small embedding model takes well under a second; a slow disk or a large
# model (EmbeddingGemma, 600 MB) needs more, and a load that never ends must still end.
DEFAULT_START_TIMEOUT_S = 120.0
# One request (16 texts of up to 512 tokens): seconds on a laptop, ~10-40 s on a busy
# 2-core machine; a child silent for this long is hung, and is ended.
DEFAULT_REQUEST_TIMEOUT_S = 120.0
_CLOSE_WAIT_S = 5.0


class EmbeddingError(Exception):
    """The embedding model could not be loaded, or its process crashed, hung or refused a
    batch. The message names the model file and what to do; the caller's process goes on."""


@dataclass(frozen=True)
class Embedded:
    """Vectors for a list of texts (row i is text i), which texts were cut to fit, and how many
    tokens of each were embedded."""

    vectors: np.ndarray  # float32, rows x dimensions, each row of unit length
    truncated: tuple[w.Truncated, ...]
    tokens: tuple[int, ...]


class EmbeddingProcess:
    """An `Embedder` (app/documents/search.py) backed by one llama.cpp child process.

    start() loads the model (embed() and the properties start it when needed); close()
    ends the child. After a crash or a hang the next call starts a fresh child. Calls from
    several threads are served one at a time. The child is the supervisor's (app/core/children):
    gone with Kestrel however Kestrel ends, and ended at Kestrel's exit if not closed."""

    def __init__(self, model_path: Path, *, max_tokens: int | None = None, threads: int | None = None,
                 texts_per_request: int = DEFAULT_TEXTS_PER_REQUEST,
                 start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
                 request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S) -> None:
        """max_tokens: cut texts to this many tokens (default and most: the model's
        trained context). threads: llama.cpp's CPU threads (default: half the cores)."""
        if texts_per_request < 1:
            raise ValueError("texts_per_request must be at least 1")
        self.model_path = Path(model_path)
        self._max_tokens = max_tokens
        self._threads = threads if threads is not None else default_threads()
        self._texts_per_request = texts_per_request
        self._start_timeout_s = start_timeout_s
        self._request_timeout_s = request_timeout_s
        self._lock = threading.RLock()
        self._child: PythonChild | None = None
        self._conn: Connection | None = None
        self._ready: w.Ready | None = None
        self._rss_bytes = 0

    # -- what callers read -------------------------------------------------------------

    @property
    def model_id(self) -> str:
        """The model's name and a prefix of its file's SHA-256 (vectors are stored under it)."""
        return self.start().model_id

    @property
    def dimensions(self) -> int:
        return self.start().dimensions

    @property
    def max_tokens(self) -> int:
        """Tokens of a text that are embedded; the rest is cut off (and logged)."""
        return self.start().max_tokens

    @property
    def rss_bytes(self) -> int:
        """The child's resident memory after the last load or batch (0 before start)."""
        return self._rss_bytes

    @property
    def pid(self) -> int | None:
        child = self._child
        return child.pid if child is not None and child.is_alive() else None

    # -- life cycle --------------------------------------------------------------------

    def start(self) -> w.Ready:
        """Start the child and load the model, unless that is done already."""
        with self._lock:
            if self._ready is not None and self._child is not None and self._child.is_alive():
                return self._ready
            self._end_child()
            if not self.model_path.is_file():
                raise EmbeddingError(f"The embedding model {self.model_path} does not exist. "
                                     "Install it again from the model library.")
            self._child, self._conn = start_python_child(
                w.serve, (str(self.model_path), self._max_tokens, self._threads), name="kestrel-embedding")
            reply = self._receive(self._start_timeout_s, "loading it")
            if isinstance(reply, w.LoadFailed):
                self._end_child()
                raise EmbeddingError(f"Could not load the embedding model {self.model_path.name}: "
                                     f"{reply.reason}. Pick another embedding model or download this one again.")
            if not isinstance(reply, w.Ready):
                self._end_child()
                raise RuntimeError(f"the embedding process answered {reply!r} before Ready")
            self._ready, self._rss_bytes = reply, reply.rss_bytes
            return reply

    def close(self) -> None:
        """Ask the child to exit, and kill it if it does not within a few seconds."""
        with self._lock:
            grace = 0.0
            if self._conn is not None and self._child is not None and self._child.is_alive():
                try:
                    self._conn.send(w.Close())
                    grace = _CLOSE_WAIT_S
                except OSError:
                    pass
            self._end_child(grace)

    def __enter__(self) -> EmbeddingProcess:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- embedding ---------------------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors for texts, in order (the `Embedder` protocol). A text longer
        than the model's context is cut to it: logged here, reported by embed_report()."""
        result = self.embed_report(texts)
        for cut in result.truncated:
            log.warning("Embedding text %d: %d tokens, only the first %d were embedded (the model's context)",
                        cut.index, cut.tokens, cut.kept)
        return [row.tolist() for row in result.vectors]

    def embed_report(self, texts: Sequence[str]) -> Embedded:
        """Vectors for texts as one float32 matrix, with the texts that were cut to fit."""
        if isinstance(texts, str):
            raise TypeError("embed takes a sequence of texts, not one string")
        items = tuple(texts)
        with self._lock:
            ready = self.start()
            if not items:
                return Embedded(np.zeros((0, ready.dimensions), dtype=np.float32), (), ())
            blocks: list[np.ndarray] = []
            truncated: list[w.Truncated] = []
            tokens: list[int] = []
            for first in range(0, len(items), self._texts_per_request):
                block = items[first:first + self._texts_per_request]
                vectors = self._request(w.Embed(block))
                matrix = np.frombuffer(vectors.data, dtype=np.float32).reshape(vectors.rows, ready.dimensions)
                blocks.append(matrix)
                truncated += [w.Truncated(cut.index + first, cut.tokens, cut.kept) for cut in vectors.truncated]
                tokens += vectors.tokens
            return Embedded(np.concatenate(blocks), tuple(truncated), tuple(tokens))

    def _request(self, request: w.Embed) -> w.Vectors:
        assert self._conn is not None
        try:
            self._conn.send(request)
        except OSError:
            pass  # The child is gone; _receive says how it ended.
        reply = self._receive(self._request_timeout_s, f"embedding {len(request.texts)} texts")
        if isinstance(reply, w.EmbedFailed):
            raise EmbeddingError(f"The embedding model {self.model_path.name} refused a batch: {reply.reason}")
        if not isinstance(reply, w.Vectors) or reply.rows != len(request.texts):
            self._end_child()
            raise RuntimeError(f"the embedding process answered {reply!r} to {len(request.texts)} texts")
        self._rss_bytes = reply.rss_bytes
        return reply

    def _receive(self, timeout_s: float, doing: str) -> w.Reply:
        """The child's next reply; a child that dies or stays silent past timeout_s is ended
        and reported as an EmbeddingError naming what it was doing."""
        assert self._conn is not None and self._child is not None
        name = self.model_path.name
        try:
            if self._conn.poll(timeout_s):
                reply: w.Reply = self._conn.recv()
                return reply
        except (EOFError, OSError):
            code = self._child.wait(_CLOSE_WAIT_S)
            self._end_child()
            raise EmbeddingError(f"The embedding process stopped while {doing} with {name} "
                                 f"({_exit_words(code)}). It starts again on the next request; "
                                 "if this keeps happening, pick another embedding model.") from None
        self._end_child()
        raise EmbeddingError(f"The embedding process did not answer within {timeout_s:g} s while {doing} "
                             f"with {name}, so Kestrel stopped it. It starts again on the next request.")

    def _end_child(self, grace_s: float = 0.0) -> None:
        """End the child (after grace_s, when it was asked to exit), and forget it."""
        child, conn = self._child, self._conn
        self._child = self._conn = None
        self._ready = None
        if child is not None:
            child.end(grace_s)  # SIGKILL past the grace: it also ends a stopped (SIGSTOP) process
        if conn is not None:
            conn.close()


def default_threads() -> int:
    """Half the cores, at least one: indexing runs in the background beside a chat, and on a
    busy machine more threads than cores made a batch slower, not faster (measured on 2
    cores: 200 short texts in 2.3 s with 1 thread, 5.5 s with 2)."""
    return max(1, (os.cpu_count() or 2) // 2)


def _exit_words(code: int | None) -> str:
    if code is None:
        return "it did not exit"
    if code < 0:
        return f"ended by signal {-code}"
    return f"exit code {code}"
