"""Errors the engine raises inside itself; each carries the facts its Error event sends."""

from __future__ import annotations

from app.engine.failure_words import WINDOW, describe
from app.engine.failures import (
    DeviceRefused, ImageFailure, LoadFailure, NoBackend, NoDeviceWorked, PromptTooLong, ServerFailed, ShapeFailure,
)


class ModelLoadError(Exception):
    """A model could not be loaded; failure says why, in facts a front end words."""

    def __init__(self, failure: LoadFailure | NoDeviceWorked | DeviceRefused | NoBackend | ServerFailed) -> None:
        self.failure = failure
        super().__init__(self.message)

    @property
    def message(self) -> str:
        """In the window's words (logs, tests, and the fallback reasons Loaded sends)."""
        return describe(self.failure, WINDOW)


class ContextOverflow(Exception):
    """The prompt alone is longer than the context."""

    def __init__(self, prompt_tokens: int, context_length: int) -> None:
        self.failure = PromptTooLong(prompt_tokens, context_length)
        super().__init__(describe(self.failure, WINDOW))

    @property
    def prompt_tokens(self) -> int:
        return self.failure.prompt_tokens

    @property
    def context_length(self) -> int:
        return self.failure.context_length


class ShapeRefused(Exception):
    """An answer cannot have the shape asked for (tools, a grammar): failure says why."""

    def __init__(self, failure: ShapeFailure) -> None:
        self.failure = failure
        super().__init__(describe(failure, WINDOW))


class ImageRefused(Exception):
    """Images the model cannot take: it has no projector, or one image is not readable,
    too big, or one too many (app/engine/backends/llama/image_prompt.py); failure says which."""

    def __init__(self, failure: ImageFailure) -> None:
        self.failure = failure
        super().__init__(describe(failure, WINDOW))


class ServerFailedError(Exception):
    """A server the person added failed an answer (app/engine/backends/remote/): failure says which and how."""

    def __init__(self, failure: ServerFailed) -> None:
        self.failure = failure
        super().__init__(describe(failure, WINDOW))
