"""Prompt-lookup decoding: draft the next tokens from n-grams of the prompt, verify them in one batch."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Generator, Sequence

import llama_cpp

from app.core.settings import PromptLookupMode

MAX_NGRAM = 4
MIN_NGRAM = 2  # single tokens match almost anywhere: their drafts rarely hold
MAX_DRAFT = 12
FIRST_DRAFT = 4
# Steps decoded one token at a time before drafting starts: their time is what a draft
# step has to beat.
PLAIN_FIRST = 2
# Draft steps looked back over to decide whether drafting pays.
WINDOW = 8
# Plain steps drafting rests for once it stopped paying, doubled each time it fails again.
# A rest, not the end: an answer often opens in its own words and copies from the
# prompt later (the fixed code after "Here is the corrected function:").
FIRST_REST = 16
LONGEST_REST = 128


class NgramDrafter:
    """Where each n-gram (2 to 4 tokens) was last followed by something, to propose what
    followed it then."""

    def __init__(self, tokens: Sequence[int]) -> None:
        self.tokens: list[int] = []
        self._next: dict[tuple[int, ...], int] = {}
        for token in tokens:
            self.add(token)

    def add(self, token: int) -> None:
        tokens = self.tokens
        end = len(tokens)
        # The n-grams that end just before this token are now followed by it.
        for n in range(MIN_NGRAM, MAX_NGRAM + 1):
            if end >= n:
                self._next[tuple(tokens[end - n:end])] = end
        tokens.append(token)

    def propose(self, count: int) -> list[int]:
        """Up to count tokens that followed the longest n-gram matching the end."""
        tokens = self.tokens
        for n in range(MAX_NGRAM, MIN_NGRAM - 1, -1):
            if len(tokens) < n:
                continue
            start = self._next.get(tuple(tokens[-n:]))
            if start is not None:
                draft = tokens[start:start + count]
                # An image's positions hold negative stand-in ids (image_prompt.py): never drafted.
                return next((draft[:i] for i, token in enumerate(draft) if token < 0), draft)
        return []


@dataclass
class LookupStats:
    """How drafting went in one answer."""

    mode: PromptLookupMode = PromptLookupMode.OFF
    steps: int = 0  # verify batches
    drafted: int = 0
    accepted: int = 0
    rests: int = 0  # times drafting stopped paying and rested

    @property
    def acceptance(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0


@dataclass
class _Policy:
    """Drafting goes on while it pays: a verify step must give tokens faster than a plain
    step does, else drafting rests for a while (longer each time) and tries again; its
    length grows while drafts hold and shrinks to what held."""

    forced: bool
    stats: LookupStats
    length: int = FIRST_DRAFT
    plain_s: deque = field(default_factory=lambda: deque(maxlen=WINDOW))
    # (seconds, tokens given) of the last verify steps.
    draft_steps: deque = field(default_factory=lambda: deque(maxlen=WINDOW))
    rest: int = FIRST_REST // 2
    rest_left: int = 0

    @property
    def drafting(self) -> bool:
        return self.rest_left == 0 and len(self.plain_s) >= PLAIN_FIRST

    def plain(self, seconds: float) -> None:
        self.plain_s.append(seconds)
        self.rest_left = max(0, self.rest_left - 1)

    def verified(self, drafted: int, accepted: int, seconds: float) -> None:
        stats = self.stats
        stats.steps += 1
        stats.drafted += drafted
        stats.accepted += accepted
        self.length = min(MAX_DRAFT, self.length + 2) if accepted == drafted else max(1, accepted + 1)
        self.draft_steps.append((seconds, accepted + 1))
        if self.forced or len(self.draft_steps) < 4:
            return
        plain = sorted(self.plain_s)[len(self.plain_s) // 2]
        # Time over tokens of the whole window, not a mean of each step's rate: that mean
        # weighs a refused draft (one token) as much as a kept one (several), and made
        # drafting that pays look as if it did not.
        drafted_rate = sum(s for s, _ in self.draft_steps) / sum(n for _, n in self.draft_steps)
        if drafted_rate > plain:
            stats.rests += 1
            self.rest = min(LONGEST_REST, self.rest * 2)
            self.rest_left = self.rest
            self.draft_steps.clear()


def lookup_tokens(llm: Any, prompt: Sequence[int], sampling: dict[str, Any], *, mode: PromptLookupMode, limit: int,
                  stats: LookupStats) -> Generator[int, None, None]:
    """The tokens llm.generate would give, drafted from the prompt and verified in batches.

    llm.generate evaluates the prompt (reusing the KV cache as it always does) and picks
    the first token; then each step either decodes one token, or decodes the last token
    with a draft and samples every position of that batch in order with the same sampler
    chain: a draft token is kept only when the sampler picks it. Greedy keeps the tokens
    the model chooses; with sampling, drawing from p and keeping the draft when the draw
    equals it is speculative sampling's accept/reject for a one-token proposal, so the
    distribution is unchanged. Only the batch's positions get logits, not the prompt's.
    """
    first = llm.generate(prompt, **sampling)
    try:
        token = next(first)
    finally:
        first.close()
    stats.mode = mode
    policy = _Policy(forced=mode == PromptLookupMode.ON, stats=stats)
    drafter = NgramDrafter(llm._input_ids.tolist())
    ctx, sampler, n_ctx = llm._ctx, llm._sampler, llm.n_ctx()
    memory = llama_cpp.llama_get_memory(ctx.ctx)
    produced = 1
    while True:
        yield token
        drafter.add(token)
        room = min(n_ctx - llm.n_tokens - 1, limit - produced)
        draft = drafter.propose(min(policy.length, room)) if policy.drafting and room > 0 else []
        started = time.perf_counter()
        if not draft:
            llm.eval([token])
            token = sampler.sample(ctx, -1)
            produced += 1
            policy.plain(time.perf_counter() - started)
            continue
        n_past = llm.n_tokens
        batch = [token, *draft]
        llm._batch.set_batch(batch=batch, n_past=n_past, logits_all=True)
        ctx.decode(llm._batch)
        llm.input_ids[n_past:n_past + len(batch)] = batch
        chosen: list[int] = []
        for i in range(len(batch)):
            chosen.append(sampler.sample(ctx, i))
            if i >= len(draft) or chosen[-1] != draft[i]:
                break
        accepted = len(chosen) - 1
        # The cells of the draft tokens that were not kept go; the rest stay in the cache.
        llm.n_tokens = n_past + 1 + accepted
        if accepted < len(draft):
            llama_cpp.llama_memory_seq_rm(memory, 0, llm.n_tokens, -1)
        policy.verified(len(draft), accepted, time.perf_counter() - started)
        produced += len(chosen)
        for kept in chosen[:-1]:
            yield kept
            drafter.add(kept)
        token = chosen[-1]
