"""The one error autostart raises: words for the person, naming the file or key and what to do."""

from __future__ import annotations


class AutostartError(Exception):
    """Writing or removing the sign-in entry was refused; str() says what happened and what to do."""


def reason(error: OSError) -> str:
    """The system's own short reason (such as "Permission denied"), or the error as text."""
    return error.strerror or str(error) or type(error).__name__
