"""The service's event fan-out and the tasks it runs: the two things every owner shares."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from app.service.events import Event

Listener = Callable[[Event], None]


class EventBus:
    """Every event the service emits, handed to each listener in the order they subscribed.

    Owners subscribe before front ends do (they are built first), so an owner that
    keeps state in step with an event (the open chat, the model session) has done so
    before a front end hears of it.
    """

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call listener with every event from now on; returns what unsubscribes it."""
        self._listeners.append(listener)

        def unsubscribe() -> None:  # twice is harmless (the adapter's close(), then its destruction)
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def emit(self, event: Event) -> None:
        for listener in list(self._listeners):
            listener(event)


class TaskGroup:
    """Coroutines run on the front end's loop and kept until they end; all cancelled at shutdown.

    Slots called outside a coroutine (a button) start their work here, so the loop is
    the one the front end runs, taken when the service is built.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run a coroutine on the loop, keeping it until it ends."""
        task = self._loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def cancel_all(self) -> None:
        """End what is still running (a load, a search) before the history closes under it."""
        current = asyncio.current_task()
        pending = [task for task in self._tasks if task is not current and not task.done()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
