"""The exception a format's reader raises for a file it refuses, carrying the cause and the plain reason."""

from __future__ import annotations

from app.documents.values import UnreadableCause


class Refused(Exception):
    """A file this reader will not or cannot read; `reason` is shown to the user as it is."""

    def __init__(self, cause: UnreadableCause, reason: str) -> None:
        super().__init__(reason)
        self.cause = cause
        self.reason = reason
