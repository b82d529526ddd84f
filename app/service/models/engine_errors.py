"""What the engine client raises and reports: failures as facts, worded for the window."""

from __future__ import annotations

from dataclasses import dataclass

from app.engine import protocol as p
from app.engine.failure_words import WINDOW, describe
from app.engine.failures import During, EngineStopped, Failure


class EngineError(Exception):
    """A request failed: failure holds the facts, kind what the user can do about it."""

    def __init__(self, failure: Failure) -> None:
        self.failure = failure
        super().__init__(self.message)

    @property
    def kind(self) -> p.ErrorKind:
        return self.failure.kind

    @property
    def message(self) -> str:
        """The failure in the window's words (the service's Problems, the model state);
        the CLI words failure with its flags instead (app/cli/failure_words.py)."""
        return describe(self.failure, WINDOW)


class EngineCrashed(EngineError):
    """The engine process died while a request was in flight."""

    def __init__(self, failure: EngineStopped) -> None:
        super().__init__(failure)
        self.stopped = failure

    @property
    def exit_code(self) -> int | None:
        return self.stopped.exit_code

    @property
    def during(self) -> During:
        return self.stopped.during


@dataclass(frozen=True)
class EngineDied:
    """What on_died hears: the engine ended without being asked to.

    restart: Kestrel ended it because it did not respond to Stop, and the front end
    should start it again now rather than on the next message.
    """

    exit_code: int | None
    message: str
    restart: bool = False
