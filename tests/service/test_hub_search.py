"""The service side of "Search Hugging Face": a newer search supersedes an older one, failures
come back as words, and a found repository's files carry a fit verdict for a recorded machine;
against real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Iterator

import pytest

from app.core.settings import GenerationSettings, Settings
from app.hardware.fit import Verdict
from app.hardware.report import HardwareReport, RamInfo
from app.service.library.hub_search import ESTIMATED_WORDS, HubSearch
from tests.hardware.machines import recorded_report
from tests.helpers.http_servers import TestServer, hugging_face_repo, running_server
from tests.helpers.hub_answers import EMPTY_ANSWER, serve_search

_GIB = 1024**3
REPO = "someone/Thinker-GGUF"


@pytest.fixture(scope="module")
def laptop() -> HardwareReport:
    """A recorded machine with 4 GiB free: a 1 GiB file runs, a 6 GiB one does not."""
    return dataclasses.replace(recorded_report("linux_vm"), ram=RamInfo(total=8 * _GIB, available=4 * _GIB))


@pytest.fixture
def servers() -> Iterator[tuple[TestServer, TestServer]]:
    with running_server() as front, running_server() as storage:
        yield front, storage


def hub_search(endpoint: str, report: HardwareReport | None, loaded: int = 0) -> HubSearch:
    async def hardware() -> HardwareReport | None:
        return report

    async def loaded_need(_report: HardwareReport) -> int:
        return loaded

    settings = Settings(generation=GenerationSettings(context_length=4096))
    return HubSearch(hardware, loaded_need, lambda: settings, lambda: endpoint)


def test_a_search_finds_the_repositories_most_downloaded_first(server: TestServer) -> None:
    serve_search(server, "thinker")

    found = asyncio.run(hub_search(server.base, None).search("thinker"))

    assert found is not None and found.problem is None
    assert [r.id for r in found.repos][:2] == ["someone/Thinker-GGUF", "someone-else/Thinker-Coder-GGUF"]


def test_no_match_and_an_unreachable_hub_are_words_not_exceptions(server: TestServer) -> None:
    serve_search(server, "nothing-like-it", EMPTY_ANSWER)
    search = hub_search(server.base, None)

    assert asyncio.run(search.search("nothing-like-it")).repos == ()  # type: ignore[union-attr]
    gone = asyncio.run(hub_search("http://127.0.0.1:9", None).search("thinker"))
    assert gone is not None and gone.repos == ()
    assert gone.problem is not None and gone.problem.startswith("Could not reach 127.0.0.1:9:")


def test_a_newer_search_supersedes_an_older_one(server: TestServer) -> None:
    """The older search's answer (slow to come) is dropped: its caller hears None."""
    slow = serve_search(server, "thin", slow_chunk=1, slow_delay_s=0.002)
    serve_search(server, "thinker")
    search = hub_search(server.base, None)

    async def both() -> tuple[object, object]:
        older = asyncio.ensure_future(search.search("thin"))
        await asyncio.sleep(0.05)
        newer = await search.search("thinker")
        return await older, newer

    older, newer = asyncio.run(both())

    assert older is None, "superseded"
    assert newer is not None and newer.query == "thinker" and len(newer.repos) == 3
    assert server.requests("GET", slow), "the older one was asked, then dropped"


def test_a_search_runs_off_the_loops_thread(server: TestServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.library.huggingface import hub_search as library

    threads: list[str] = []
    real = library.search_models

    def watched(*args: object, **kwargs: object) -> object:
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(library, "search_models", watched)
    serve_search(server, "thinker")

    asyncio.run(hub_search(server.base, None).search("thinker"))

    assert threads and threads[0] != threading.main_thread().name


def test_a_repositorys_files_carry_a_fit_verdict_estimated_from_their_size(
        servers: tuple[TestServer, TestServer], laptop: HardwareReport) -> None:
    front, storage = servers
    small, big = b"G" * 1024, b"G" * 2048
    endpoint = hugging_face_repo(front, storage, REPO, {"thinker-Q4_K_M.gguf": small, "thinker-Q8_0.gguf": big})
    listing = asyncio.run(hub_search(endpoint, laptop).choices(REPO))
    assert listing is not None and listing.problem is None
    assert [(r.choice.quantization, r.choice.unit.size) for r in listing.rows] == [("Q4_K_M", 1024), ("Q8_0", 2048)]
    assert all(r.fit is not None and r.fit.verdict is Verdict.RUNS_WELL for r in listing.rows)
    assert all(r.reason.endswith(ESTIMATED_WORDS) for r in listing.rows)


def test_a_file_bigger_than_the_memory_free_will_not_fit(laptop: HardwareReport) -> None:
    from app.library.huggingface.hub import DownloadUnit
    from app.library.download.unit import FileSpec
    from app.library.huggingface.hub_search import RepoChoice
    from app.service.library.hub_search import judged

    settings = Settings(generation=GenerationSettings(context_length=4096))
    unit = DownloadUnit("t-F16.gguf", "t-F16", "gguf", (FileSpec("http://h/t-F16.gguf", "t-F16.gguf", None,
                                                                  40 * _GIB),), "http://h/t-F16.gguf")
    row = judged(laptop, RepoChoice(unit, "F16"), settings, 0)
    unknown = judged(laptop, RepoChoice(dataclasses.replace(unit, files=(FileSpec("u", "t.gguf"),)), None),
                     settings, 0)

    assert row.fit is not None and row.fit.verdict is Verdict.WONT_FIT
    assert unknown.fit is None and "did not state its size" in unknown.reason


def test_a_repository_that_is_not_there_is_said(servers: tuple[TestServer, TestServer]) -> None:
    front, _storage = servers

    listing = asyncio.run(hub_search(front.base, None).choices("someone/missing"))

    assert listing is not None and listing.rows == ()
    assert listing.problem is not None and "has no public model repository named someone/missing" in listing.problem
