"""Errors the engine reports to the client with a kind the caller can act on."""

from __future__ import annotations

# Advice in the window's words; the CLI puts its flags in their place (app/cli/chat.py).
OTHER_DEVICE_ADVICE = "choose another device in the settings, or CPU"
LOWER_CONTEXT_ADVICE = "lower the context length"


class ModelLoadError(Exception):
    """A model could not be loaded; the message says what the user can do."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class ContextOverflow(Exception):
    """The prompt alone is longer than the context."""

    # What to do, in the window's words. Only the text crosses to the front ends, so the
    # CLI finds this sentence and puts its flag (--ctx) in its place.
    ADVICE = "Shorten the message or raise the context length in the settings."

    def __init__(self, prompt_tokens: int, context_length: int) -> None:
        self.prompt_tokens = prompt_tokens
        self.context_length = context_length
        super().__init__(
            f"The prompt is {prompt_tokens:,} tokens but the context holds {context_length:,}. "
            + self.ADVICE
        )
