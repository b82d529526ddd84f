"""The embedding child process: loads one embedding GGUF with llama.cpp and turns texts into vectors."""

from __future__ import annotations

import ctypes
import hashlib
import os
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
import psutil

# A model id carries this much of the file's SHA-256: enough to tell two files apart.
_HASH_CHARS = 12


@dataclass(frozen=True)
class Ready:
    """Sent once the model is loaded: what the parent reports about it."""

    model_id: str
    dimensions: int
    max_tokens: int
    rss_bytes: int


@dataclass(frozen=True)
class LoadFailed:
    """Sent instead of Ready when the model cannot be loaded, with llama.cpp's reason."""

    reason: str


@dataclass(frozen=True)
class Embed:
    """Turn these texts into vectors, in one or more llama.cpp batches."""

    texts: tuple[str, ...]


@dataclass(frozen=True)
class Truncated:
    """A text longer than the model's context: only its first kept tokens were embedded."""

    index: int
    tokens: int
    kept: int


@dataclass(frozen=True)
class Vectors:
    """The answer to Embed: row i of the float32 matrix (rows x dimensions, unit length) is text i,
    made from tokens[i] of its tokens (all of them, or the context's worth of a text cut to fit)."""

    data: bytes
    rows: int
    truncated: tuple[Truncated, ...]
    rss_bytes: int
    tokens: tuple[int, ...]


@dataclass(frozen=True)
class EmbedFailed:
    """llama.cpp refused the batch (a Python-level error; a native crash ends the process instead)."""

    reason: str


@dataclass(frozen=True)
class Close:
    """Free the model and exit."""


Reply = Ready | LoadFailed | Vectors | EmbedFailed


def model_id_of(path: Path, name: str | None) -> str:
    """The model's name and a prefix of the file's SHA-256: vectors from different files
    (another model, or the same one converted at another precision) are never mixed."""
    digest = hashlib.sha256()
    with path.open("rb") as source:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
    return f"{name or path.stem}:{digest.hexdigest()[:_HASH_CHARS]}"


def serve(conn: Connection, model_path: str, max_tokens: int | None, threads: int | None) -> None:
    """The child's main: load, say Ready (or LoadFailed), then answer Embed until Close or
    until the parent goes away."""
    import llama_cpp  # Only the child loads llama.cpp: the parent never maps the model.

    _keep_native_log(llama_cpp)
    path = Path(model_path)
    try:
        trained = _trained_context(llama_cpp, path)
        context = min(max_tokens, trained) if max_tokens else trained
        # n_batch = n_ubatch = the context: a whole text is one ubatch (non-causal models
        # need that), and short texts share a batch up to that many tokens in all.
        model = llama_cpp.Llama(str(path), embedding=True, n_ctx=context, n_batch=context, n_ubatch=context,
                                n_threads=threads, n_threads_batch=threads, verbose=False)
        if int(model.pooling_type()) == llama_cpp.LLAMA_POOLING_TYPE_NONE:
            raise ValueError("it has no pooling (it is not a sentence-embedding model)")
        name = model.metadata.get("general.name")
        ready = Ready(model_id_of(path, name), model.n_embd(), context, _rss())
    except (ValueError, RuntimeError, OSError) as exc:
        said = "; ".join(_native_errors[-2:])
        conn.send(LoadFailed((str(exc) or type(exc).__name__) + (f" (llama.cpp: {said})" if said else "")))
        return
    conn.send(ready)
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        if isinstance(request, Close):
            return
        try:
            conn.send(_embed(model, request.texts, context))
        except (ValueError, RuntimeError) as exc:
            conn.send(EmbedFailed(str(exc) or type(exc).__name__))


# llama.cpp's error lines (ggml_log_level ERROR = 4), kept for the reason of a failed load.
_NATIVE_ERROR = 4
_native_errors: list[str] = []
_log_callbacks: list[object] = []  # the ctypes callback must outlive every call into llama.cpp


def _keep_native_log(llama_cpp: Any) -> None:
    """Keep llama.cpp's log out of the terminal: error lines go into a short list, the rest is dropped."""

    @llama_cpp.llama_log_callback
    def keep(level: int, text: bytes, _user_data: object) -> None:
        line = text.decode("utf-8", errors="replace").strip()
        if level == _NATIVE_ERROR and line:
            _native_errors.append(line)
            del _native_errors[:-10]

    _log_callbacks.append(keep)
    llama_cpp.llama_log_set(keep, ctypes.c_void_p(0))


def _trained_context(llama_cpp: Any, path: Path) -> int:
    """The context length the model was trained for, read from the file (memory-mapped,
    no context built)."""
    params = llama_cpp.llama_model_default_params()
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    if not model:
        raise ValueError(f"llama.cpp cannot read {path.name} as a GGUF model")
    try:
        return int(llama_cpp.llama_model_n_ctx_train(model))
    finally:
        llama_cpp.llama_model_free(model)


def _embed(model: Any, texts: tuple[str, ...], context: int) -> Vectors:
    """Vectors for texts: llama.cpp packs as many whole texts into one decode as fit the
    batch (Llama.embed), mean-pools each and the rows are normalized here, in float32."""
    counts = [len(model.tokenize(text.encode("utf-8"))) for text in texts]
    truncated = [Truncated(index, count, context) for index, count in enumerate(counts) if count > context]
    raw = model.embed(list(texts), normalize=False, truncate=True)
    matrix = np.asarray(raw, dtype=np.float32).reshape(len(texts), -1)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = matrix / np.maximum(norms, np.float32(1e-12))
    return Vectors(matrix.astype(np.float32).tobytes(), len(texts), tuple(truncated), _rss(),
                   tuple(min(count, context) for count in counts))


def _rss() -> int:
    """This process's resident memory now, for the design notes and the Documents page."""
    return int(psutil.Process(os.getpid()).memory_info().rss)
