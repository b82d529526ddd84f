"""The download queue against real HTTP servers on 127.0.0.1: one at a time, pause, resume,
cancel, a failure that does not block the next, and downloads remembered across a restart."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Callable


from app.library.download import DownloadOptions
from app.library.huggingface.hub import direct_unit
from app.library.models import ModelLibrary
from app.service.library.downloads import DownloadQueue
from app.service.events import DownloadChanged, DownloadItem
from tests.helpers.http_servers import Served, TestServer, sha256_of

FAST = DownloadOptions(retry_delays=(0.01,), timeout_s=5.0, chunk_size=8 * 1024, space_margin=0)


class Setup:
    """A queue over a library in tmp_path, and every event it sent."""

    def __init__(self, tmp_path: Path) -> None:
        self.library = ModelLibrary(tmp_path / "models")
        self.state_file = tmp_path / "downloads.json"
        self.events: list[DownloadChanged] = []
        self.queue = self.new_queue()

    def new_queue(self) -> DownloadQueue:
        queue = DownloadQueue(self.library, self.state_file, options=FAST)
        queue.subscribe(self.events.append)
        return queue

    def item(self, download_id: str) -> DownloadItem:
        return next(i for i in self.queue.items() if i.id == download_id)

    async def until(self, check: Callable[[], Any], timeout: float = 10) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while not check():
            assert asyncio.get_running_loop().time() < deadline, [e.item for e in self.events[-5:]]
            await asyncio.sleep(0.01)

    def state(self, download_id: str) -> str:
        return self.item(download_id).state


def serve(server: TestServer, name: str, body: bytes, slow: bool = False) -> str:
    server.files[f"/{name}"] = Served(body=body, linked_sha256=sha256_of(body),
                                      slow_chunk=8192 if slow else 0, slow_delay_s=0.01 if slow else 0.0)
    return server.url(f"/{name}")


def test_one_runs_at_a_time_and_a_failure_does_not_block_the_next(
        server: TestServer, tmp_path: Path, tiny_model: Path) -> None:
    body = tiny_model.read_bytes()

    async def scenario() -> None:
        s = Setup(tmp_path)
        missing = s.queue.start(direct_unit(server.url("/missing.gguf")))
        good = s.queue.start(direct_unit(serve(server, "good.gguf", body)))
        assert s.state(good) == "queued", "one download at a time"
        await s.until(lambda: s.state(good) == "done")
        assert s.state(missing) == "failed" and "There is no file at" in s.item(missing).message
        done = s.item(good)
        assert done.model_id == "good" and s.library.get("good") is not None
        assert done.message == "Downloaded; its SHA-256 was checked." and done.done == len(body)
        assert [e.item.state for e in s.events if e.item.id == good][0] == "queued"
        assert s.queue.start(direct_unit(server.url("/good.gguf"))) != good, "a finished one may start again"
        s.queue.forget_finished()
        await s.until(lambda: all(i.state == "done" for i in s.queue.items()))
        await s.queue.settled()  # the list is written on the queue's disk thread
        assert json.loads(s.state_file.read_text())["downloads"] == []

    asyncio.run(scenario())


def test_pause_lets_the_next_run_and_resume_continues_with_range(
        server: TestServer, tmp_path: Path, tiny_model: Path) -> None:
    body = tiny_model.read_bytes()

    async def scenario() -> None:
        s = Setup(tmp_path)
        first = s.queue.start(direct_unit(serve(server, "first.gguf", body, slow=True)))
        second = s.queue.start(direct_unit(serve(server, "second.gguf", body)))
        await s.until(lambda: s.item(first).done > 100_000)
        s.queue.pause(first)
        await s.until(lambda: s.state(first) == "paused")
        kept = (s.library.root / "first" / "first.gguf.part").stat().st_size
        await s.until(lambda: s.state(second) == "done")
        server.files["/first.gguf"].slow_delay_s = 0.0
        s.queue.resume(first)
        await s.until(lambda: s.state(first) == "done")
        assert server.requests("GET", "/first.gguf")[-1].range == f"bytes={kept}-"
        assert s.item(first).model_id == "first"
        moving = [e.item for e in s.events if e.item.id == first and e.item.state == "running"]
        assert any(i.bytes_per_second > 0 and i.total == len(body) for i in moving)
        seconds = max(1.0, len(moving) / 10)
        assert len(moving) <= 12 * seconds, "progress is throttled to about ten a second"

    asyncio.run(scenario())


def test_cancel_deletes_what_arrived_running_or_paused(
        server: TestServer, tmp_path: Path, tiny_model: Path) -> None:
    body = tiny_model.read_bytes()

    async def scenario() -> None:
        s = Setup(tmp_path)
        running = s.queue.start(direct_unit(serve(server, "a.gguf", body, slow=True)))
        await s.until(lambda: s.item(running).done > 50_000)
        s.queue.cancel(running)
        await s.until(lambda: s.state(running) == "cancelled")
        cancelled = s.item(running)
        assert cancelled.message == "What had arrived was deleted.", "the state says Cancelled; once"
        assert cancelled.done == 0 and cancelled.bytes_per_second == 0.0 and cancelled.seconds_left is None
        paused = s.queue.start(direct_unit(serve(server, "b.gguf", body, slow=True)))
        await s.until(lambda: s.item(paused).done > 50_000)
        s.queue.pause(paused)
        await s.until(lambda: s.state(paused) == "paused")
        assert (s.library.root / "b" / "b.gguf.part").exists()
        assert s.item(paused).message == "What arrived is kept; resuming continues from there."
        s.queue.cancel(paused)
        assert s.state(paused) == "cancelled" and "deleted" in s.item(paused).message
        assert "cancel" not in s.item(paused).message.lower() and s.item(paused).done == 0
        # Deleted on the queue's disk thread, not the event loop's.
        await s.until(lambda: not s.library.root.exists() or list(s.library.root.iterdir()) == [])

    asyncio.run(scenario())


def test_unfinished_downloads_come_back_paused_after_a_restart(
        server: TestServer, tmp_path: Path, tiny_model: Path) -> None:
    body = tiny_model.read_bytes()

    async def first_run(s: Setup) -> tuple[str, str]:
        running = s.queue.start(direct_unit(serve(server, "r.gguf", body, slow=True)))
        waiting = s.queue.start(direct_unit(serve(server, "w.gguf", body)))
        await s.until(lambda: s.item(running).done > 50_000)
        await s.queue.close()  # the app closes
        return running, waiting

    async def second_run(s: Setup, running: str, waiting: str) -> None:
        restored = {i.id: i for i in s.queue.items()}
        assert set(restored) == {running, waiting} and s.queue.last_problem is None
        assert all(i.state == "paused" and "Paused when Kestrel closed" in i.message for i in restored.values())
        assert restored[running].done > 50_000 and restored[running].total == len(body)
        server.files["/r.gguf"].slow_delay_s = 0.0
        s.queue.resume(running)
        s.queue.resume(waiting)
        await s.until(lambda: all(i.state == "done" for i in s.queue.items()))
        assert server.requests("GET", "/r.gguf")[-1].range == f"bytes={restored[running].done}-"
        assert sorted(m.id for m in s.library.list()) == ["r", "w"]

    s = Setup(tmp_path)
    ids = asyncio.run(first_run(s))
    asyncio.run(second_run(Setup(tmp_path), *ids))


def test_a_damaged_list_of_downloads_starts_empty_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "downloads.json").write_text('{"version": 1, "downloads": [{"id": "x"}]}')
    queue = DownloadQueue(ModelLibrary(tmp_path / "models"), tmp_path / "downloads.json")
    assert queue.items() == () and "could not be read back" in (queue.last_problem or "")
    (tmp_path / "downloads.json").write_text("{")
    queue = DownloadQueue(ModelLibrary(tmp_path / "models"), tmp_path / "downloads.json")
    assert queue.items() == () and "could not be read" in (queue.last_problem or "")


def test_a_running_download_says_what_it_does_before_its_first_byte(server: TestServer, tmp_path: Path) -> None:
    async def scenario() -> None:
        s = Setup(tmp_path)
        url = serve(server, "m.gguf", b"GGUF" + bytes(50_000))
        started = s.queue.start(direct_unit(url))
        await s.until(lambda: s.state(started) in ("done", "failed"))
        host = server.base.removeprefix("http://")
        said = [e.item.message for e in s.events if e.item.id == started and e.item.state == "running"]
        assert f"Connecting to {host}…" in said and f"Waiting for {host} to answer…" in said
        moving = [e.item for e in s.events if e.item.id == started and e.item.done > 0]
        assert moving and all(i.message == "" for i in moving if i.state == "running"), "bytes flow: no step"

    asyncio.run(scenario())


def test_a_download_from_an_unreachable_host_fails_at_once_in_words(tmp_path: Path) -> None:
    async def scenario() -> None:
        s = Setup(tmp_path)
        failed = s.queue.start(direct_unit("https://nonexistent.invalid/m.gguf"))
        await s.until(lambda: s.state(failed) == "failed")
        assert s.item(failed).message.startswith("Could not reach nonexistent.invalid: no network connection?")

    asyncio.run(scenario())


def test_a_speech_download_goes_to_the_speech_folder_and_comes_back_paused_after_a_restart(
        server: TestServer, tmp_path: Path) -> None:
    """A catalog speech model rides the same queue (one at a time, pause, resume, the list kept across a restart),
    but lands in the speech folder whole, not in the models library."""
    from app.voice.catalog.entries import parse_speech_entry
    from app.voice.catalog.fetch import is_downloaded, speech_unit
    files = {"model.bin": bytes(range(256)) * 2_000, "config.json": b"{}", "tokenizer.json": b"{}",
             "vocabulary.txt": b"a\nb\n"}
    for name, body in files.items():
        server.files[f"/kestrel/whisper-test/resolve/{'b' * 40}/{name}"] = Served(
            body=body, linked_sha256=sha256_of(body), linked_size=len(body), slow_chunk=8192, slow_delay_s=0.01)
    entry = parse_speech_entry({
        "id": "whisper-test", "kind": "transcription", "name": "Whisper test", "publisher": "tests",
        "license": "MIT", "repo": "kestrel/whisper-test", "revision": "b" * 40, "parameters_millions": 39,
        "description": "For the tests.",
        "files": [{"path": name, "sha256": sha256_of(body), "size": len(body)} for name, body in files.items()]})
    speech = tmp_path / "speech"

    async def scenario() -> None:
        s = Setup(tmp_path)
        s.queue = DownloadQueue(s.library, s.state_file, options=FAST, endpoint=server.base, speech_folder=speech)
        s.queue.subscribe(s.events.append)
        started = s.queue.start(speech_unit(entry, server.base))
        await s.until(lambda: s.item(started).done > 0)
        s.queue.pause(started)
        await s.until(lambda: s.state(started) == "paused")
        await s.queue.close()
        s.queue = DownloadQueue(s.library, s.state_file, options=FAST, speech_folder=speech)
        s.queue.subscribe(s.events.append)
        [restored] = s.queue.items()
        assert restored.state == "paused" and restored.catalog_id == "whisper-test" and restored.done > 0
        s.queue.resume(restored.id)
        await s.until(lambda: s.state(restored.id) == "done")
        done = s.item(restored.id)
        assert done.message.startswith("Downloaded; every file's SHA-256 was checked.")
        assert done.model_id is None and s.library.list() == []
        assert is_downloaded(entry, speech)
        assert sorted(p.name for p in (speech / "whisper-test").iterdir()) == sorted(files)
        ranges = [r.range for r in server.requests("GET") if r.path.endswith("/model.bin")]
        assert ranges[0] is None and ranges[-1] is not None and ranges[-1].startswith("bytes="), ranges
        await s.queue.close()

    asyncio.run(scenario())
