"""DocumentsService as the window uses it: a folder added and indexed in the background, rescans,
pauses (the user's, an answer's, power's), a restart that goes on, a folder gone, and search."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from app.core.conversation import Message, MessageState, Role
from app.documents.collections import DocumentsError
from app.documents.values import DocumentText, Unreadable
from app.service import events as ev
from app.service.documents import documents_service
from app.service.documents.documents_service import DocumentsService
from app.hardware.power import Power
from app.service.documents_events import ANSWERING_WORDS, BATTERY_WORDS, PAUSED_WORDS, SAVING_WORDS
from tests.documents.index_fakes import read_here

E = TypeVar("E")


class Heard:
    """The events a service sent, with a wait for a condition on them."""

    def __init__(self) -> None:
        self.events: list[ev.Event] = []

    def of(self, kind: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, kind)]

    def info(self, name: str) -> ev.CollectionInfo | None:
        changes = self.of(ev.CollectionsChanged)
        return next((i for i in changes[-1].collections if i.name == name), None) if changes else None

    async def until(self, predicate: Callable[[], Any], what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; last events: {self.events[-5:]}")
            await asyncio.sleep(0.01)

    def idle(self, name: str, files: int) -> Callable[[], bool]:
        def check() -> bool:
            info = self.info(name)
            return info is not None and info.state is ev.IndexState.IDLE and info.files == files and \
                info.indexed + info.unreadable == files
        return check


class Gate:
    """A reader in this process that reads one file each time the test lets it (or at once when open)."""

    def __init__(self) -> None:
        self.read: list[Path] = []
        self._allowed = threading.Semaphore(0)
        self.open = False

    def allow(self, files: int) -> None:
        for _ in range(files):
            self._allowed.release()

    def __call__(self, paths: Sequence[Path]) -> Iterator[DocumentText | Unreadable]:
        for path in paths:
            while not self.open and not self._allowed.acquire(timeout=0.05):
                pass
            self.read.append(path)
            yield from read_here([path])


def folder_of(tmp_path: Path, files: int = 3, name: str = "notes") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for number in range(files):
        (folder / f"note{number:03}.txt").write_text(f"Note {number} says the ferry leaves at {number} o'clock.\n",
                                                     encoding="utf-8")
    return folder


@asynccontextmanager
async def running(tmp_path: Path, read: Callable[..., Iterator[DocumentText | Unreadable]] | None = read_here,
                  **options: Any) -> AsyncIterator[tuple[DocumentsService, Heard]]:
    heard = Heard()
    service = DocumentsService(heard.events.append, database=tmp_path / "documents.sqlite3", read=read, **options)
    await service.start()
    try:
        yield service, heard
    finally:
        await service.close()


def test_a_folder_added_is_indexed_in_the_background_with_progress_and_searched(tmp_path: Path) -> None:
    folder = folder_of(tmp_path, 12)
    (folder / "broken.txt").write_bytes(b"\x00\x01\x02\xff" * 50)

    async def scenario() -> None:
        async with running(tmp_path, read=None) as (service, heard):  # the reader's real child process
            added = await service.add_folder(folder)
            assert (added.name, added.folder) == ("notes", folder.resolve())
            await heard.until(heard.idle("notes", 13), "the folder indexed")
            info = service.collections()[0]
            assert (info.files, info.indexed, info.unreadable, info.chunks) == (13, 12, 1, 12)
            assert info.last_indexed is not None and info.last_indexed <= time.time()
            progress = heard.of(ev.IndexingProgress)
            assert progress and progress[-1].done == progress[-1].total == 13
            assert all(p.collection == "notes" for p in progress)
            files = await service.files("notes")
            [broken] = [f for f in files if f.state == "unreadable"]
            assert broken.path.name == "broken.txt" and "binary" in broken.reason
            hits = await service.search("ferry 7 o'clock", ["notes", "gone"], 3)
            assert hits and hits[0].path.name == "note007.txt"
            assert await service.search("ferry", ["gone"], 3) == []
            readers = [child for child in multiprocessing.active_children() if child.name == "kestrel-reader"]
            assert len(readers) == 1  # one reader for the service's life
        readers[0].join(5)
        assert not readers[0].is_alive()  # and it ends with the service

    asyncio.run(scenario())


def test_a_rescan_follows_files_changed_added_and_deleted(tmp_path: Path) -> None:
    folder = folder_of(tmp_path, 3)

    async def scenario() -> None:
        async with running(tmp_path) as (service, heard):
            await service.add_folder(folder, "trips")
            await heard.until(heard.idle("trips", 3), "the first run")
            (folder / "note000.txt").write_text("The puffins nest at Látrabjarg.\n", encoding="utf-8")
            (folder / "note001.txt").unlink()
            (folder / "new.md").write_text("# Bread\n\nBake it for forty minutes.\n", encoding="utf-8")
            service.rescan()
            runs = len(heard.of(ev.IndexingProgress))
            await heard.until(lambda: len(heard.of(ev.IndexingProgress)) > runs and heard.idle("trips", 3)(),
                              "the rescan")
            files = {f.path.name for f in await service.files("trips")}
            assert files == {"note000.txt", "note002.txt", "new.md"}
            assert [h.path.name for h in await service.search("puffins", ["trips"], 5)] == ["note000.txt"]
            assert [h.path.name for h in await service.search("forty minutes", ["trips"], 5)] == ["new.md"]
            assert {h.path.name for h in await service.search("ferry", ["trips"], 5)} == {"note002.txt"}
    asyncio.run(scenario())


@pytest.mark.parametrize(("hold", "words", "state"), [
    ("pause", PAUSED_WORDS, ev.IndexState.PAUSED),
    ("answering", ANSWERING_WORDS, ev.IndexState.WAITING),
    ("saving", SAVING_WORDS, ev.IndexState.WAITING),
    ("battery", BATTERY_WORDS, ev.IndexState.WAITING),
])
def test_indexing_waits_while_held_and_says_why(tmp_path: Path, hold: str, words: str, state: ev.IndexState,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(documents_service, "POWER_EVERY_S", 0.05)  # the service's poll of the power state
    folder = folder_of(tmp_path, 8)
    gate = Gate()
    power = [Power()]  # a recorded power state
    polls: list[Power] = []  # each time the service read it

    def read_power() -> Power:
        polls.append(power[0])
        return power[0]

    async def scenario() -> None:
        async with running(tmp_path, read=gate, read_power=read_power) as (service, heard):
            await service.add_folder(folder)
            gate.allow(3)
            await heard.until(lambda: len(gate.read) == 3, "three files read")
            if hold == "pause":
                service.pause()
            elif hold == "answering":
                service.hear(ev.AnswerStarted(_message()))
            elif hold == "saving":
                service.set_saving_power(True)
            else:
                power[0] = Power(on_battery=True)
                # Polled, not told: two more reads mean one that began after the change has been
                # applied (the polls run one after another), whatever the machine's load.
                seen = len(polls)
                await heard.until(lambda: len(polls) >= seen + 2, "the battery noticed")
            gate.open = True
            await heard.until(lambda: any(p.waiting_because == words for p in heard.of(ev.IndexingProgress)),
                              "the reason it waits")
            held_at = len(gate.read)
            await asyncio.sleep(0.4)
            assert len(gate.read) == held_at <= 4, "it read on while held"
            info = heard.info("notes")
            assert info is not None and info.state is state
            # A search is answered while the run waits.
            assert [h.path.name for h in await service.search("ferry 1 o'clock", ["notes"], 1)] == ["note001.txt"]
            if hold == "pause":
                service.resume()
            elif hold == "answering":
                service.hear(ev.AnswerFinished(_message()))
            elif hold == "saving":
                service.set_saving_power(False)
            else:
                power[0] = Power()
            await heard.until(heard.idle("notes", 8), "the run finished after the hold")
            assert len(gate.read) == 8

    asyncio.run(scenario())


def test_a_restart_goes_on_where_the_last_run_stopped(tmp_path: Path) -> None:
    folder = folder_of(tmp_path, 10)
    gate = Gate()

    async def first() -> None:
        async with running(tmp_path, read=gate) as (service, heard):
            await service.add_folder(folder)
            gate.allow(4)
            await heard.until(lambda: len(gate.read) == 4, "four files read")
            service.pause()  # looked at after the next file: what was read is written before it waits
            gate.allow(1)
            await heard.until(lambda: any(p.waiting_because for p in heard.of(ev.IndexingProgress)), "paused")

    async def second() -> list[Path]:
        again = Gate()
        again.open = True
        async with running(tmp_path, read=again) as (service, heard):
            await heard.until(heard.idle("notes", 10), "the rest read after the restart")
            return again.read

    asyncio.run(first())
    reread = asyncio.run(second())
    assert [p.name for p in reread] == [f"note{n:03}.txt" for n in range(5, 10)]


def test_a_folder_that_disappears_is_said_and_the_index_kept(tmp_path: Path) -> None:
    folder = folder_of(tmp_path, 2)

    async def scenario() -> None:
        async with running(tmp_path) as (service, heard):
            await service.add_folder(folder)
            await heard.until(heard.idle("notes", 2), "indexed")
            folder.rename(tmp_path / "elsewhere")
            service.rescan()
            await heard.until(lambda: heard.of(ev.DocumentsProblem), "the problem said")
            [problem] = heard.of(ev.DocumentsProblem)
            assert problem.collection == "notes" and "is not there" in problem.text
            await heard.until(lambda: (i := heard.info("notes")) is not None and i.state is ev.IndexState.FAILED,
                              "the collection marked failed")
            assert len(await service.files("notes")) == 2  # an unplugged drive does not empty the index

    asyncio.run(scenario())


def test_mistakes_adding_a_folder_are_said_in_plain_words(tmp_path: Path) -> None:
    folder = folder_of(tmp_path, 1)
    (folder / "inner").mkdir()

    async def scenario() -> None:
        async with running(tmp_path) as (service, heard):
            with pytest.raises(DocumentsError, match="does not exist"):
                await service.add_folder(tmp_path / "nowhere")
            with pytest.raises(DocumentsError, match="is not a folder"):
                await service.add_folder(folder / "note000.txt")
            await service.add_folder(folder)
            await heard.until(heard.idle("notes", 1), "indexed")
            with pytest.raises(DocumentsError, match="already the collection “notes”"):
                await service.add_folder(folder, "again")
            with pytest.raises(DocumentsError, match="already a collection named “notes”"):
                await service.add_folder(tmp_path, "Notes")
            with pytest.raises(DocumentsError, match="inside the folder of the collection “notes”"):
                await service.add_folder(folder / "inner")
            with pytest.raises(DocumentsError, match="holds the folder of the collection “notes”"):
                await service.add_folder(tmp_path, "all")
            await service.remove("notes")
            assert service.collections() == ()
            assert folder.is_dir()
            for asked in (service.files("notes"), service.remove("notes"), service.reindex("notes")):
                with pytest.raises(DocumentsError, match="There is no collection named “notes”: it may have been"):
                    await asked

    asyncio.run(scenario())


def test_reindex_reads_every_file_again(tmp_path: Path) -> None:
    folder = folder_of(tmp_path, 3)
    gate = Gate()
    gate.open = True

    async def scenario() -> None:
        async with running(tmp_path, read=gate) as (service, heard):
            await service.add_folder(folder)
            await heard.until(heard.idle("notes", 3), "indexed")
            await service.reindex("notes")
            await heard.until(lambda: len(gate.read) == 6, "read again")
            await heard.until(heard.idle("notes", 3), "indexed again")

    asyncio.run(scenario())


def _message() -> Any:
    from app.core.conversation import Message, MessageState, Role

    return Message(id=1, conversation_id=1, role=Role.ASSISTANT, text="", created=0.0,
                   state=MessageState.COMPLETE, stats=None)


def test_an_index_that_cannot_be_opened_is_said_and_refuses_plainly(tmp_path: Path) -> None:
    async def scenario() -> None:
        heard = Heard()
        service = DocumentsService(heard.events.append, database=tmp_path, read=read_here)  # a folder, not a file
        await service.start()
        try:
            await heard.until(lambda: heard.of(ev.DocumentsProblem), "the problem said")
            assert heard.of(ev.DocumentsProblem)[0].collection == ""
            with pytest.raises(DocumentsError):
                await service.add_folder(folder_of(tmp_path, 1))
        finally:
            await service.close()

    asyncio.run(scenario())


def test_a_reader_that_fails_is_said_and_the_service_goes_on(tmp_path: Path) -> None:
    good = folder_of(tmp_path, 2, "good")
    bad = folder_of(tmp_path, 2, "bad")

    def reader(paths: Sequence[Path]) -> Iterator[DocumentText | Unreadable]:
        if any(path.parent == bad.resolve() for path in paths):
            raise RuntimeError("the document reader process did not start")
        yield from read_here(paths)

    async def scenario() -> None:
        async with running(tmp_path, read=reader) as (service, heard):
            await service.add_folder(bad)
            await heard.until(lambda: heard.of(ev.DocumentsProblem), "the problem said")
            assert "did not start" in heard.of(ev.DocumentsProblem)[0].text
            await service.add_folder(good)
            await heard.until(heard.idle("good", 2), "the next collection indexed")
            assert heard.info("bad").state is ev.IndexState.FAILED  # type: ignore[union-attr]
            await service.remove("bad")
            assert [i.name for i in service.collections()] == ["good"]

    asyncio.run(scenario())


def test_a_collection_removed_while_it_is_read_stops_and_goes(tmp_path: Path) -> None:
    folder = folder_of(tmp_path, 6)
    gate = Gate()

    async def scenario() -> None:
        async with running(tmp_path, read=gate) as (service, heard):
            await service.add_folder(folder)
            gate.allow(2)
            await heard.until(lambda: len(gate.read) == 2, "two files read")
            removal = asyncio.ensure_future(service.remove("notes"))
            # remove() asks the run to stop before its first await: let it, before the reader may go on, or a
            # quick worker finished the third file, found no stop yet and waited at the gate for a fourth.
            await asyncio.sleep(0)
            gate.allow(1)  # the run looks at its control after the file in the reader's hands
            await asyncio.wait_for(removal, 10)
            assert service.collections() == () and heard.of(ev.DocumentsProblem) == []
            await asyncio.sleep(0.3)
            assert len(gate.read) == 3
            assert await service.search("ferry", ["notes"], 3) == []

    asyncio.run(scenario())


def test_the_time_left_leaves_the_time_held_out() -> None:
    from app.service.documents.documents_pace import Pace

    now = [100.0]
    pace = Pace(clock=lambda: now[0])
    now[0] += 2.0
    assert pace.left(2, 10) is None  # two files say nothing of the pace yet
    now[0] += 2.0
    pace.held_s += 6.0  # paused for six seconds: 4 files in 4 s of work, not in 10
    now[0] += 6.0
    assert pace.left(4, 10) == pytest.approx(6.0)


def test_indexing_waits_for_a_chat_answer_and_an_api_answer_until_both_end(tmp_path: Path) -> None:
    # The two end in any order: a chat's answer ending while an API answer runs must not free
    # indexing (nor the other way round); the model session says when API answers run.
    def answer(message_id: int) -> Message:
        return Message(message_id, 1, Role.ASSISTANT, "", 0.0, MessageState.STREAMING, None)

    service = DocumentsService(lambda event: None, database=tmp_path / "documents.sqlite3")
    service.hear(ev.AnswerStarted(answer(2)))
    service.hear(ev.ServingChanged(True))
    service.hear(ev.AnswerFinished(answer(2)))
    assert service.waiting_because() == ANSWERING_WORDS
    service.hear(ev.AnswerStarted(answer(3)))
    service.hear(ev.ServingChanged(False))
    assert service.waiting_because() == ANSWERING_WORDS
    service.hear(ev.AnswerInterrupted(answer(3), ev.InterruptReason.ENGINE_FAILED))
    assert service.waiting_because() == ""
