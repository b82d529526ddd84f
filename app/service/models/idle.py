"""Giving memory back: the model is unloaded after a quiet spell, and loads again on demand.

A loaded model holds its weights and KV cache (hundreds of MB to many GB) for as long
as the app runs. After `Settings.unload_after_minutes` without an answer the model
session unloads it (or, with `Settings.exit_engine_when_idle`, ends the engine process too),
and the next message loads it again: the user sees "loading", not an error, and the
conversation is evaluated afresh.

With quick ask on and `quick_ask.keep_model_ready` (both the default) the model is never
unloaded for being idle: a quick ask's first token is due within a second of the shortcut,
and loading the model again takes longer than that (`unload_after`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from app.core.settings import Settings

UNLOADED_WORDS = "Model unloaded to save memory (loads on your next message)"


def unload_after(settings: Settings) -> float | None:
    """Minutes without an answer before the model is unloaded; None: never."""
    quick_ask = settings.quick_ask
    if quick_ask.enabled and quick_ask.keep_model_ready:
        return None
    return settings.unload_after_minutes


class IdleTimer:
    """Calls `when_idle` once `minutes()` have passed since the last restart().

    restart() after each answer and each load; stop() when an answer starts or the app
    shuts down. minutes() None means never.
    """

    def __init__(self, minutes: Callable[[], float | None], when_idle: Callable[[], Awaitable[None]],
                 spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task]) -> None:
        self._minutes = minutes
        self._when_idle = when_idle
        self._spawn = spawn
        self._task: asyncio.Task | None = None

    def restart(self) -> None:
        self.stop()
        minutes = self._minutes()
        if minutes is not None:
            self._task = self._spawn(self._wait(minutes * 60))

    def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = None

    async def _wait(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        self._task = None
        await self._when_idle()
