"""Cancel and pause flags that the request loop checks between two tokens, and while a
prompt is prepared."""

from __future__ import annotations

import threading


class PromptCancelled(Exception):
    """The request was cancelled while its prompt was being prepared (rendered, fitted,
    tokenized): the answer ends as cancelled, before its first token."""


class GenerationControl:
    """Set from the engine's reader thread, read by the generating thread."""

    def __init__(self) -> None:
        self._cancelled = threading.Event()
        self._running = threading.Event()
        self._running.set()
        self._lock = threading.Lock()
        self._cancelled_early: set[int] = set()
        self.request_id: int | None = None

    def begin(self, request_id: int) -> None:
        with self._lock:
            self.request_id = request_id
            self._cancelled.clear()
            if request_id in self._cancelled_early:
                self._cancelled.set()
            # Request ids only grow: a late cancel for an older request is moot.
            self._cancelled_early = {i for i in self._cancelled_early if i > request_id}

    def end(self) -> None:
        with self._lock:
            self.request_id = None

    def cancel_request(self, request_id: int) -> None:
        """Cancel that request, whether it runs now or is still waiting its turn."""
        with self._lock:
            if self.request_id == request_id:
                self.cancel()
            else:
                self._cancelled_early.add(request_id)

    def cancel(self) -> None:
        self._cancelled.set()
        # A paused generation must wake up to notice that it was cancelled.
        self._running.set()

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def wait_while_paused(self) -> None:
        self._running.wait()
