"""The context an API request gets: as loaded, as the request asks, or larger for a long prompt, if it fits."""

from __future__ import annotations

import asyncio

from app.hardware.fit import CONTEXT_STEP, Verdict, estimate_fit
from app.library.fit_facts import facts_for
from app.library.installed import InstalledModel
from app.library.model_files.gguf_info import ModelFileError
from app.service.api.api_types import ApiRefused
from app.service.models.model_session import ModelSession
from app.service.settings_keeper import SettingsKeeper

# The most a request may ask for (the settings' own limit for a context length).
MAX_CONTEXT = 1_048_576
# Room left for the answer when a long prompt grows the context and the request set no
# smaller max_tokens: a reload for a prompt that leaves no room to answer helps nobody.
ANSWER_ROOM = 1024


class ContextPlanner:
    """Never a silent cut: a request longer than the loaded context reloads with a larger one
    when the model was made for it and it fits memory, or is refused naming both numbers."""

    def __init__(self, session: ModelSession, keeper: SettingsKeeper) -> None:
        self._session, self._keeper = session, keeper
        # Reading a GGUF header takes ~0.1 s (its vocabulary comes with it): /v1/models
        # asks for every model's on each call, so each file is read once.
        self._trained: dict[tuple[str, int, float], int | None] = {}

    @staticmethod
    def checked(asked: int | None) -> int | None:
        """The request's context_length, or ApiRefused naming it."""
        if asked is None:
            return None
        if isinstance(asked, bool) or not isinstance(asked, int) or not CONTEXT_STEP <= asked <= MAX_CONTEXT:
            raise ApiRefused(400, f"context_length must be a whole number of tokens from {CONTEXT_STEP} to "
                                  f"{MAX_CONTEXT} (got {asked!r}).", param="context_length")
        return asked

    def trained(self, model: InstalledModel) -> int | None:
        """The longest context the model was made for, read from its file once (None: not stated)."""
        key = (str(model.path), model.size, model.added)
        if key not in self._trained:
            try:
                self._trained[key] = facts_for(model.path, CONTEXT_STEP).trained_context
            except (ModelFileError, OSError):
                return None  # not kept: a drive plugged back in answers next time
        return self._trained[key]

    async def ensure(self, model: InstalledModel, asked: int | None, *, prompt_tokens: int | None,
                     room: int = 0) -> None:
        """Load model with the context asked, or one that holds prompt_tokens and room to answer."""
        session = self._session
        loaded = session.client.loaded
        now = loaded.context_length if loaded is not None else 0
        if asked is not None:
            needed = asked
        else:
            assert prompt_tokens is not None
            needed = _rounded(prompt_tokens + max(1, min(room, ANSWER_ROOM)))
        trained = await asyncio.to_thread(self.trained, model)
        if trained is not None and needed > trained:
            if prompt_tokens is not None and prompt_tokens >= trained:
                raise ApiRefused(400, f"The prompt is {prompt_tokens} tokens, and {model.title} takes at most "
                                      f"{trained} tokens of context. Shorten the messages.",
                                 param="messages", code="context_length_exceeded")
            needed = trained
        if prompt_tokens is not None and needed <= now:
            raise ApiRefused(400, f"The prompt is {prompt_tokens} tokens and the context is {now} tokens: "
                                  f"shorten the messages.", param="messages", code="context_length_exceeded")
        if asked is None or needed != now:
            await self._check_fit(model, needed, prompt_tokens, now)
            await session.ensure_context(needed)

    async def _check_fit(self, model: InstalledModel, needed: int, prompt_tokens: int | None, now: int) -> None:
        session = self._session
        report = await session.client.hardware_report()
        facts = await asyncio.to_thread(facts_for, model.path, needed)
        preference = model.defaults.device_preference or self._keeper.settings.device_preference
        loaded_bytes = session.model.size if session.model is not None else 0
        estimate = estimate_fit(report, facts, context_length=needed, preference=preference, loaded_bytes=loaded_bytes)
        if estimate.verdict != Verdict.WONT_FIT:
            return
        most = f" (it fits up to {estimate.max_context} tokens)" if estimate.max_context else ""
        said = f"The prompt is {prompt_tokens} tokens; " if prompt_tokens is not None else ""
        raise ApiRefused(400, f"{said}a context of {needed} tokens does not fit this machine's memory for "
                              f"{model.title}{most}; it is loaded with {now}. Shorten the messages or ask for "
                              f"less context_length.", param="context_length" if prompt_tokens is None else "messages",
                         code="context_length_exceeded")


def _rounded(tokens: int) -> int:
    return -(-tokens // CONTEXT_STEP) * CONTEXT_STEP
