"""The commands' exit statuses and the error a user can fix, shared by every subcommand."""

from __future__ import annotations

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_MODEL = 3
EXIT_ENGINE_DIED = 4
EXIT_CONTEXT = 5
EXIT_DEVICE = 6
EXIT_INTERRUPTED = 130


class UserError(Exception):
    """A problem the user can fix; carries the exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status
