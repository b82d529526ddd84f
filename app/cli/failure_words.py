"""The engine's failures in the command line's words: what to do is a flag, not a setting."""

from __future__ import annotations

from app.engine.failure_words import Advice, describe
from app.engine.failures import Failure

_OTHER_DEVICE = "choose another with --device (--device cpu always works)"
_LOWER_CONTEXT = "lower --ctx"


def cli_words(failure: Failure, context_asked: int | None = None, context_loaded: int | None = None) -> str:
    """failure for `kestrel chat`. context_asked is the context --ctx (or the settings)
    asked for, context_loaded what the model was loaded with (less when the model holds
    no more): they decide what a prompt longer than the context advises."""
    advice = Advice(_OTHER_DEVICE, _LOWER_CONTEXT, _context_advice(context_asked, context_loaded))
    return describe(failure, advice)


def _context_advice(asked: int | None, loaded: int | None) -> str:
    """What to do about a prompt longer than the context, in the command line's words."""
    if asked is not None and loaded is not None and loaded < asked:
        return (f"Shorten the message: {loaded:,} tokens is the most this model holds, so a larger "
                "--ctx does not help.")
    it_was = f" (it was {asked:,} tokens)" if asked is not None else ""
    return f"Shorten the message, or give it a longer context with --ctx{it_was}."
