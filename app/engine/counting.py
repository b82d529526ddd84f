"""Counting tokens beside a running answer: a thread of its own, held back only while the model changes.

Why a count may run while an answer is written, on the same model:

- llama.cpp: `Llama.tokenize` is `llama_tokenize(vocab, ...)` on the model's vocabulary,
  which loading fills and nothing changes afterwards; the call's working data is its own
  (llama.cpp keeps tokenizing thread-safe on purpose, issue ggml-org/llama.cpp#9369, and
  its own server's /tokenize and Anthropic count_tokens handlers call it on the HTTP
  threads while the server decodes, with no task in its queue). Decoding uses the
  context, which tokenizing never touches. Both are ctypes calls, which let go of the
  GIL, so the count runs on another core while a token is decoded.
- ONNX Runtime GenAI: its Python bindings (pybind11) keep the GIL for the whole of each
  call (src/python/python.cpp releases it nowhere), so `Tokenizer.encode` and
  `Generator.generate_next_token` never run at the same time: a count waits for at most
  the token being made, and the answer for at most one count.

What must not happen is a model freed (Unload, another Load, Shutdown) under a count:
ModelGate below keeps the two apart, and keeps counts in pipe order with model changes.
"""

from __future__ import annotations

import queue
import threading
import traceback
from contextlib import contextmanager
from typing import Callable, Iterator

from app.engine import protocol as p
from app.engine.backends.backend import Backend
from app.engine.errors import ImageRefused
from app.engine.failures import EngineBug, NoModel


class ModelGate:
    """Counts run beside an answer, never beside a change of model.

    The request loop changes the backend (load, unload, close); the counting thread uses
    it. The reader thread announces each change as it reads it from the pipe, so counts
    that came after a Load wait for it and count with the new model, and counts that came
    before it finish first: a model is never freed under a count. The lock is held for
    moments only: the reader thread, which answers pings, never waits for a count.
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._pending = 0  # changes read from the pipe and not yet done
        self._counting = False

    def announce(self) -> None:
        """A Load, Unload or Shutdown was read from the pipe (reader thread)."""
        with self._changed:
            self._pending += 1

    @contextmanager
    def changing(self) -> Iterator[None]:
        """Change the backend (request loop), once the count in progress, if any, is done."""
        with self._changed:
            self._changed.wait_for(lambda: not self._counting)
        try:
            yield
        finally:
            with self._changed:
                self._pending -= 1
                self._changed.notify_all()

    @contextmanager
    def counting(self) -> Iterator[None]:
        """Use the backend (counting thread), once no change is announced or under way."""
        with self._changed:
            self._changed.wait_for(lambda: self._pending == 0)
            self._counting = True
        try:
            yield
        finally:
            with self._changed:
                self._counting = False
                self._changed.notify_all()


def count(backend: Backend, request: p.CountTokens) -> int:
    """The count the request asks for, from this backend."""
    if request.messages is not None:
        return backend.count_prompt(request.messages, request.thinking)
    return backend.count_tokens(request.text)


def serve_counts(requests: queue.Queue[p.CountTokens | None], gate: ModelGate, backend: Callable[[], Backend | None],
                 send: Callable[[p.EngineEvent], None]) -> None:
    """The counting thread: answer each CountTokens with TokenCount, or with Error(NoModel)
    when no model is loaded (at once: nothing is waited for), Error(NoVision or BadImage)
    for images the model cannot take, or Error(EngineBug); None ends it."""
    while True:
        request = requests.get()
        if request is None:  # the engine's loop ended (Shutdown): so does this thread
            return
        answer: p.EngineEvent
        with gate.counting():
            model = backend()
            try:
                answer = (p.Error(request.request_id, NoModel()) if model is None
                          else p.TokenCount(request.request_id, count(model, request)))
            except ImageRefused as exc:  # images the model cannot take, as generate says
                answer = p.Error(request.request_id, exc.failure)
            except Exception as exc:  # A bug: report it with its traceback, keep counting.
                answer = p.Error(request.request_id, EngineBug(f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        send(answer)
