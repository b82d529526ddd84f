"""Searching Hugging Face for "Get a model": the repositories a query finds, and a found one's
files, each with a verdict by predicted speed on this machine.

Only a front end the user typed into calls this; nothing here runs on its own. The network
work runs on a worker thread (asyncio.to_thread), never on the loop's. A newer search
supersedes an older one (the older one's caller gets None), and so does a newer listing.
The network code is imported only when a search runs: chat and doctor never load it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from app.core.settings import Settings
from app.hardware.fit import FitEstimate, FitFacts, estimate_fit, with_others_now
from app.hardware.report import HardwareReport
from app.hardware.speed import Measured
from app.library.fit_facts import loaded_context
from app.service.library.speed_judge import judged

if TYPE_CHECKING:
    from app.library.huggingface.hub_search import HubRepo, RepoChoice

T = TypeVar("T")
ESTIMATED_WORDS = ("the model's shape, and so the memory its context needs and its exact speed, is known only "
                   "once it is downloaded, so this is rougher than the verdict of a model you have.")
# Said where a file's size is not known: no number is made up for it.
SPEED_NOT_KNOWN = "Speed not known"
# The size a file's or repository's name states: "14B", "1.5B", "30B-A3B" (a mixture of experts, 3B of
# its 30B weights read per token). Between separators only: "Qwen2.5" and "Mixtral-8x7B" state none.
_SIZE_IN_NAME = re.compile(r"(?<![A-Za-z0-9.])(\d+(?:\.\d+)?B(?:-A\d+(?:\.\d+)?B)?)(?![A-Za-z0-9])", re.IGNORECASE)


@dataclass(frozen=True)
class FoundRepos:
    """What a search found; problem is the words for a search that failed (repos then empty)."""

    query: str
    repos: tuple[HubRepo, ...]
    problem: str | None = None


@dataclass(frozen=True)
class ChoiceRow:
    """One file (or split file, or ONNX folder) of a found repository, with its verdict here.

    fit (with its predicted speed) is None when the size is not known or the machine's
    report is not there; reason is the verdict's words, said to be estimated from the
    file size, or why it is not known.
    """

    choice: RepoChoice
    fit: FitEstimate | None
    reason: str


@dataclass(frozen=True)
class RepoListing:
    """A found repository's choices; problem is the words for a listing that failed."""

    repo: str
    rows: tuple[ChoiceRow, ...]
    problem: str | None = None


class HubSearch:
    """search(query) and choices(repo) for the model manager, on a worker thread.

    hardware gives the machine's report (None: no verdicts), loaded_need the memory the
    loaded model holds (which loading another gives back), settings the app's settings
    (the context length and device preference a verdict is judged at), endpoint the hub's
    address (HF_ENDPOINT or huggingface.co, read when a search runs), measured what this
    machine's answers measured (the speed predictions are calibrated with it).
    """

    def __init__(self, hardware: Callable[[], Awaitable[HardwareReport | None]],
                 loaded_need: Callable[[HardwareReport], Awaitable[int]], settings: Callable[[], Settings],
                 endpoint: Callable[[], str] | None = None, *,
                 measured: Callable[[], Sequence[Measured]] = lambda: ()) -> None:
        self._hardware = hardware
        self._loaded_need = loaded_need
        self._settings = settings
        self._endpoint = endpoint
        self._measured = measured
        self._running: dict[str, asyncio.Future[Any]] = {}

    async def search(self, query: str, limit: int | None = None, fmt: str = "gguf") -> FoundRepos | None:
        """The repositories query finds that hold fmt ("gguf" or "onnx") files, most downloaded
        first; None when a newer search took over."""
        from app.library.download import DownloadError
        from app.library.huggingface.hub_search import DEFAULT_LIMIT, search_models

        endpoint = self._hub()
        try:
            repos = await self._latest("search", search_models, query, endpoint, 30.0, limit or DEFAULT_LIMIT,
                                       "onnx" if fmt == "onnx" else "gguf")
        except _Superseded:
            return None
        except DownloadError as exc:
            return FoundRepos(query, (), exc.message)
        except ValueError:
            return FoundRepos(query, (), "Type a model's name (up to 200 characters) to search Hugging Face.")
        return FoundRepos(query, tuple(repos))

    async def choices(self, repo: str) -> RepoListing | None:
        """repo's files with their quantization, size and verdict; None when a newer listing took over."""
        from app.library.download import DownloadError
        from app.library.huggingface.hub_search import repo_choices

        endpoint = self._hub()
        try:
            found = await self._latest("choices", repo_choices, repo, endpoint)
        except _Superseded:
            return None
        except DownloadError as exc:
            return RepoListing(repo, (), exc.message)
        report = await self._hardware()
        settings = self._settings()
        loaded = await self._loaded_need(report) if report is not None else 0
        measured = tuple(self._measured())
        rows = tuple(judged_choice(report, choice, settings, loaded, repo=repo, measured=measured) for choice in found)
        return RepoListing(repo, rows)

    def _hub(self) -> str:
        from app.library.huggingface.hub import default_endpoint

        return (self._endpoint or default_endpoint)()

    async def _latest(self, kind: str, work: Callable[..., T], *args: Any) -> T:
        """work(*args) on a worker thread; _Superseded if another of this kind started meanwhile."""
        earlier = self._running.get(kind)
        if earlier is not None:
            earlier.cancel()  # its thread finishes on its own; its answer is dropped
        mine: asyncio.Future[T] = asyncio.ensure_future(asyncio.to_thread(work, *args))
        self._running[kind] = mine
        try:
            result = await asyncio.shield(mine)
        except asyncio.CancelledError:
            if mine.cancelled() and self._running.get(kind) is not mine:
                raise _Superseded() from None
            mine.cancel()
            raise
        finally:
            if self._running.get(kind) is mine:
                del self._running[kind]
        if self._running.get(kind, mine) is not mine:
            raise _Superseded()
        return result


class _Superseded(Exception):
    """A newer search (or listing) started while this one ran."""


def judged_choice(report: HardwareReport | None, choice: RepoChoice, settings: Settings, loaded_bytes: int, *,
                  repo: str = "", measured: Sequence[Measured] = ()) -> ChoiceRow:
    """The choice with its steady verdict by predicted speed (speed_judge.judged, as the catalog's), from
    what is known before a download: its bytes, and the size its name or repo's name states (a mixture
    of experts' share). loaded_bytes: what Kestrel holds now, said beside the verdict with what other
    programs use. No size, no number: the words say the speed is not known."""
    unit = choice.unit
    size = unit.size
    if size is None:
        return ChoiceRow(choice, None, f"{SPEED_NOT_KNOWN}: the server did not state the file's size, so Kestrel "
                                       "cannot tell how much memory it needs or how fast it would run here.")
    if report is None:
        return ChoiceRow(choice, None, f"{SPEED_NOT_KNOWN}: this machine's memory and processor could not be read.")
    context = loaded_context(settings.generation.context_length, None)
    projector = sum(f.size or 0 for f in unit.files if f.name == unit.projector)
    # The Hub's units are GGUF files or ONNX folders (a "speech" unit comes from the speech catalog only).
    facts = FitFacts("onnx" if unit.format == "onnx" else "gguf", size, context, 0, projector_bytes=projector)
    fit = estimate_fit(report, facts, context_length=context, preference=settings.device_preference, steady=True)
    parameters = size_in_name(unit.key, repo)
    fit = judged(fit, report, weights=size - projector, vocab=0, parameters=parameters,
                 comfortable=settings.comfortable_tokens_per_s, onnx=unit.format == "onnx", measured=measured)
    if report.ram is not None:
        fit = with_others_now(fit, report, report.ram.available, loaded_bytes)
    stated = f" and the size its name states ({parameters})" if parameters else ""
    return ChoiceRow(choice, fit, f"{fit.summary}. Estimated from the file size{stated}: {ESTIMATED_WORDS}")


def size_in_name(*names: str) -> str:
    """The first size the names state ("14B", "30B-A3B"), "" when none does."""
    for name in names:
        found = _SIZE_IN_NAME.search(name)
        if found is not None:
            return found.group(1).upper()
    return ""
