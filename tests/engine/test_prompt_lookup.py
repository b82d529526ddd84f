"""Prompt-lookup drafting: the same text as plain decoding at temperature 0, and cancel still acts between tokens."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

from app.core.generation import GenerationSettings
from app.engine.backends.backend import DeviceChoice
from app.engine.control import GenerationControl
from app.engine.backends.llama.gguf_backend import GgufBackend
from app.engine.backends.llama.prompt_lookup import FIRST_REST, PLAIN_FIRST, LookupStats, NgramDrafter, _Policy, lookup_tokens
from app.engine.protocol import ChatMessage, Delta, Done, Generate, Load

PROMPTS = [
    "Copy this list: alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi.",
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\nRename add to plus in the code above.",
    "The kestrel hovers over the meadow. The kestrel hovers over the road. Rewrite this paragraph.",
    "Write a story.",
]


@pytest.fixture(scope="module")
def backend(tiny_model: Path):
    loaded = GgufBackend.load(Load(1, str(tiny_model), context_length=1024, threads=1), DeviceChoice("CPU"))
    yield loaded
    loaded.close()


def _answer(backend: GgufBackend, prompt: str, mode: str, tokens: int = 48,
            control: GenerationControl | None = None) -> tuple[str, Done]:
    control = control or GenerationControl()
    control.begin(1)
    request = Generate(1, (ChatMessage("user", prompt),), GenerationSettings(temperature=0.0, max_tokens=tokens, seed=1),
                       prompt_lookup=mode)
    backend.reset()
    text, done = "", None
    for event in backend.generate(request, control):
        if isinstance(event, Delta):
            text += event.text
        else:
            done = event
    assert isinstance(done, Done)
    return text, done


@pytest.mark.parametrize("prompt", PROMPTS)
def test_lookup_at_temperature_0_gives_the_plain_text(backend: GgufBackend, prompt: str) -> None:
    plain, _ = _answer(backend, prompt, "off")
    drafted, _ = _answer(backend, prompt, "on")
    assert drafted == plain


def test_drafts_are_made_and_kept_on_text_that_repeats(backend: GgufBackend) -> None:
    _answer(backend, PROMPTS[0] * 4, "on", tokens=64)
    assert backend.lookup.mode == "on" and backend.lookup.steps > 0


def test_cancel_acts_between_tokens_while_drafting(backend: GgufBackend) -> None:
    control = GenerationControl()
    seen: list[str] = []
    original = backend._piece

    def piece(token: int) -> bytes:
        seen.append("token")
        if len(seen) == 5:
            threading.Thread(target=control.cancel).start()
            control.cancel()
        return original(token)

    backend._piece = piece  # type: ignore[method-assign]
    try:
        _, done = _answer(backend, PROMPTS[0] * 4, "on", tokens=200, control=control)
    finally:
        backend._piece = original  # type: ignore[method-assign]
    assert done.finish_reason == "cancelled"
    assert done.stats.tokens == 5


def test_the_drafter_proposes_what_followed_the_last_match() -> None:
    drafter = NgramDrafter([1, 2, 3, 4, 5, 9, 1, 2])
    assert drafter.propose(3) == [3, 4, 5]
    drafter.add(7)
    assert drafter.propose(3) == []


def _policy(forced: bool) -> _Policy:
    policy = _Policy(forced=forced, stats=LookupStats())
    for _ in range(PLAIN_FIRST):
        policy.plain(0.010)
    return policy


def test_auto_rests_when_drafts_stop_paying_then_tries_again_and_rests_longer() -> None:
    policy = _policy(forced=False)
    assert policy.drafting
    for _ in range(4):  # every draft rejected: 30 ms for one token against 10 ms plain
        policy.verified(drafted=4, accepted=0, seconds=0.030)
    assert not policy.drafting and policy.stats.rests == 1
    for _ in range(FIRST_REST - 1):
        policy.plain(0.010)
    assert not policy.drafting
    policy.plain(0.010)
    assert policy.drafting, "after its rest, drafting tries again"
    for _ in range(4):
        policy.verified(drafted=4, accepted=0, seconds=0.030)
    assert policy.rest == 2 * FIRST_REST and policy.stats.rests == 2


def test_auto_judges_drafting_by_its_time_per_token_over_the_window() -> None:
    """Half the drafts refused (18 ms for one token), half kept (20 ms for five): 76 ms for
    twelve tokens, 6.3 ms a token against 10 ms plain, so drafting pays. A mean of each
    step's rate (11 ms a token) rested it."""
    policy = _policy(forced=False)
    for _ in range(2):
        policy.verified(drafted=4, accepted=0, seconds=0.018)
        policy.verified(drafted=4, accepted=4, seconds=0.020)
    assert policy.drafting and policy.stats.rests == 0
    for _ in range(4):  # 24 ms a token on average, refused or not
        policy.verified(drafted=4, accepted=1, seconds=0.048)
    assert not policy.drafting and policy.stats.rests == 1


def test_drafts_that_pay_go_on_and_a_forced_on_never_rests() -> None:
    paying = _policy(forced=False)
    for _ in range(8):
        paying.verified(drafted=4, accepted=4, seconds=0.015)  # 5 tokens in 15 ms
    forced = _policy(forced=True)
    for _ in range(8):
        forced.verified(drafted=4, accepted=0, seconds=0.030)
    assert paying.drafting and paying.stats.rests == 0 and paying.length == 12
    assert forced.drafting and forced.stats.rests == 0


# Two-sample chi-square at p = 0.001: the Wilson-Hilferty approximation of the critical value.
def _chi2_critical(df: int, z: float = 3.09) -> float:
    return df * (1 - 2 / (9 * df) + z * (2 / (9 * df)) ** 0.5) ** 3


def _homogeneity(first: Counter, second: Counter) -> tuple[float, int]:
    """Chi-square statistic and degrees of freedom of two samples over the same outcomes
    (outcomes expected fewer than 5 times are pooled)."""
    n1, n2 = sum(first.values()), sum(second.values())
    cells, pooled = [], [0, 0]
    for outcome in set(first) | set(second):
        a, b = first[outcome], second[outcome]
        if (a + b) * min(n1, n2) / (n1 + n2) < 5:
            pooled[0] += a
            pooled[1] += b
        else:
            cells.append((a, b))
    if sum(pooled):
        cells.append((pooled[0], pooled[1]))
    statistic = 0.0
    for a, b in cells:
        total = a + b
        for observed, n in ((a, n1), (b, n2)):
            expected = total * n / (n1 + n2)
            statistic += (observed - expected) ** 2 / expected
    return statistic, len(cells) - 1


def test_lookup_with_sampling_draws_from_the_same_distribution(backend: GgufBackend, monkeypatch) -> None:
    """Speculative sampling's promise, checked by counting. Five tokens after a prompt are
    sampled 1,200 times without drafts and 1,200 times (other seeds) with a two-token draft
    at every step drafting allows (from the fourth token: PLAIN_FIRST plain steps come
    first). The fourth and fifth tokens follow one distribution both ways, and the draft
    is both kept and refused."""
    llm = backend._llm
    prompt = llm.tokenize(b"The kestrel hovers over the meadow, and the kestrel", add_bos=True)
    sampling = dict(top_k=3, top_p=1.0, min_p=0.0, temp=1.0, repeat_penalty=1.0)
    assert PLAIN_FIRST == 2, "the fourth token is the first one drafted"

    def sample(seed: int, drafted: bool, stats: LookupStats) -> tuple[int, ...]:
        llm.reset()
        llm.n_tokens = 0
        llm.set_seed(seed)
        tokens = (lookup_tokens(llm, prompt, sampling, mode="on", limit=5, stats=stats) if drafted
                  else llm.generate(prompt, **sampling))
        try:
            return tuple(next(tokens) for _ in range(5))[3:]
        finally:
            tokens.close()

    plain = Counter(sample(seed, False, LookupStats()) for seed in range(1200))
    # The draft is the most common ending: right for some answers, wrong for the others.
    common = plain.most_common(1)[0][0]
    monkeypatch.setattr(NgramDrafter, "propose", lambda self, count: list(common[:count]))
    stats = LookupStats()
    drafted = Counter(sample(10_000 + seed, True, stats) for seed in range(1200))
    assert 0 < stats.accepted < stats.drafted, "the test must see drafts both kept and refused"
    statistic, df = _homogeneity(plain, drafted)
    assert df >= 3, "too few outcomes for the test to mean anything"
    assert statistic < _chi2_critical(df), (statistic, df, plain.most_common(6), drafted.most_common(6))
