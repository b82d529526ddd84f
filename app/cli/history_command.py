"""A command over the history file alone (`kestrel memory`, `kestrel projects`): its service, its door, its ends in words."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from app.cli.terminal_text import terminal_text
from app.cli.user_error import EXIT_INTERRUPTED, UserError
from app.core.paths import data_paths
from app.core.store.history import HistoryDamaged, HistoryError
from app.library.models import ModelLibrary
from app.service.events import Event, Problem
from app.service.models.client import EngineClient
from app.service.root import Service

EXIT_NOT_DONE = 7  # the history file could not be used (damaged, read-only, disk full)


class HistoryDoor(Protocol):
    """A door over the history file that says whether the file was found damaged."""

    @property
    def history_damage(self) -> HistoryDamaged | None: ...


Door = TypeVar("Door", bound=HistoryDoor)
T = TypeVar("T")


def said(command: Callable[[], int]) -> int:
    """command's exit status; a UserError, a history that will not do or Ctrl+C said in words instead."""
    try:
        return command()
    except UserError as exc:
        print(f"kestrel: {terminal_text(str(exc))}", file=sys.stderr, flush=True)
        return exc.status
    except HistoryError as exc:
        print(f"kestrel: {terminal_text(str(exc))}", file=sys.stderr, flush=True)
        return EXIT_NOT_DONE
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED


async def with_history_door(make_door: Callable[[Service], Door], kept: str,
                            work: Callable[[Door], Awaitable[T]]) -> T:
    """work done through a door of a service over the history file (no model is loaded, no settings are
    written). A history found damaged is left to the window to choose for; `kept` says what of the
    person's it holds ("memories")."""
    paths = data_paths().ensure()
    service = Service(history_path=paths.history_db, settings_path=None, library=ModelLibrary(paths.models),
                      client=EngineClient())
    service.subscribe(_print_problem)
    try:
        door = make_door(service)
        await service.open()
        if door.history_damage is not None:
            raise UserError(f"{door.history_damage} Open Kestrel's window to choose; your {kept} are kept in "
                            "that file.", EXIT_NOT_DONE)
        return await work(door)
    finally:
        await service.shutdown()


def _print_problem(event: Event) -> None:
    if isinstance(event, Problem):
        print(f"kestrel: {terminal_text(event.text)}", file=sys.stderr, flush=True)
