"""How much of the model's context is left for a round's tool results, and each result cut to fit it.

A result larger than the room left would make the next round's prompt overflow the context, and
the answer would end with "Shorten the message" when the user wrote nothing long. So each result
is cut to what fits, with a note saying so (app/tools/result_cut.py), before the model sees it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from app.core.answer_stats import AnswerStats
from app.core.generation import GenerationSettings
from app.service.models.engine_errors import EngineError
from app.service.models.engine_handle import EngineHandle
from app.tools.result_cut import CutReason, cut_result

CountTokens = Callable[[str], Awaitable[int]]
# Tokens kept per result for what the chat template wraps around it (the tool turn's markers) and
# for the model's call as the template writes it again, which may take more tokens than it did.
TURN_TOKENS = 32
# The first guess of how many characters fit is this many per token: more than any common
# tokenizer packs, so the guess is cut down by counting, never grown.
_WIDEST_TOKEN_CHARS = 8
# Counting again after a guess that did not fit shrinks it by the overshoot and this much more.
_SHRINK = 0.9
_GUESSES = 8


def answer_room(context_length: int, max_tokens: int) -> int:
    """The tokens kept free for the answer that follows the results: as the engine keeps them when
    it leaves out old turns (app/engine/answers/answer_common.fit_prompt)."""
    return min(max_tokens, max(64, context_length // 4))


class ResultRoom:
    """The tokens left for one round's tool results; `fit` cuts each result and takes what it used.

    tokens None: the room is not known (the engine did not report the round's prompt), and only
    the settings' limit applies. count: the loaded model's own token count; without it (or when it
    fails) a character counts as a token, which few texts exceed.
    """

    def __init__(self, tokens: int | None, count: CountTokens | None = None) -> None:
        self.tokens = tokens
        self._count = count

    @classmethod
    def after_round(cls, stats: AnswerStats | None, engine: EngineHandle, settings: GenerationSettings) -> ResultRoom:
        """The room after a round whose answer made tool calls: the context less that round's prompt,
        the tokens it wrote (its calls) and the room kept for the answer to come. No round trip: the
        round's Done already counted them."""
        loaded = engine.loaded
        if stats is None or loaded is None or stats.prompt_tokens <= 0:
            return cls(None)
        n_ctx = loaded.context_length
        if stats.prompt_tokens + stats.tokens > n_ctx:
            # A server took more than the context Kestrel knows of (the chat's setting, or the server's word):
            # its own is larger, by how much is not known. Counted against ours, every result was cut to nothing.
            return cls(None)
        left = n_ctx - stats.prompt_tokens - stats.tokens - answer_room(n_ctx, settings.max_tokens)
        return cls(left, engine.count_tokens)

    async def fit(self, text: str, limit: int) -> str:
        """The result as the model gets it: whole where it fits within the room and `limit` (characters,
        the settings'), otherwise its beginning and a note saying how much of it was left out."""
        total = len(text)
        if self.tokens is None:
            return text if total <= limit else cut_result(text, limit, CutReason.SETTING)
        budget = self.tokens - TURN_TOKENS
        keep = min(total, limit, max(budget, 0) * _WIDEST_TOKEN_CHARS)
        for _ in range(_GUESSES):
            given = text if keep >= total else cut_result(text, keep, self._reason(keep, limit))
            used = await self._tokens_of(given)
            if used <= budget or keep == 0:
                break
            keep = max(0, min(keep - 1, int(keep * budget / used * _SHRINK)))
        else:
            given = cut_result(text, 0, CutReason.CONTEXT)
            used = await self._tokens_of(given)
        self.tokens -= used + TURN_TOKENS
        return given

    @staticmethod
    def _reason(keep: int, limit: int) -> CutReason:
        return CutReason.SETTING if keep >= limit else CutReason.CONTEXT

    async def _tokens_of(self, text: str) -> int:
        if self._count is not None:
            try:
                return await self._count(text)
            except EngineError:
                self._count = None  # no model to count with now: the estimate below for the rest
        return len(text)
