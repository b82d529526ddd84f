"""PipeWriter over a real multiprocessing pipe read by a real thread: order, returns at once, a broken pipe."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection

import pytest

from app.engine import protocol as p
from app.service.models.pipe_writer import PipeWriter, pickled, write_message

IMAGE_BYTES = 256 * 1024  # four fill the 64 KB pipe buffer 16 times


def _generate(request_id: int, images: int = 4) -> p.Generate:
    # Different bytes each: pickle writes an object it has seen once only.
    return p.Generate(request_id, (p.ChatMessage("user", "Look", images=tuple(
        bytes([request_id % 256, n]) * (IMAGE_BYTES // 2) for n in range(images))),))


class _Reader:
    """Reads the other end on a thread until it gets Shutdown; keeps the request ids in order."""

    def __init__(self, conn: Connection) -> None:
        self.ids: list[int] = []
        self.sizes: dict[int, int] = {}
        self._conn = conn
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            request = self._conn.recv()
            self.ids.append(request.request_id)
            if isinstance(request, p.Generate):
                self.sizes[request.request_id] = sum(len(i) for m in request.messages for i in m.images)
            if isinstance(request, p.Shutdown):
                return

    def join(self, timeout: float = 30) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the reader never got the last request"


_MADE: list[PipeWriter] = []


@pytest.fixture(autouse=True)
def _writers_closed_after() -> Iterator[None]:
    """Every writer a test made is closed after it: an open one keeps its thread waiting for ever, for the
    rest of the run (the whole suite in one process ended with such threads)."""
    yield
    while _MADE:
        _MADE.pop().close()


def _writer(conn: Connection, broken: list[OSError] | None = None,
            unsendable: list[tuple[p.Request, Exception]] | None = None) -> PipeWriter:
    writer = PipeWriter(conn, on_broken=(broken if broken is not None else []).append,
                        on_unsendable=lambda r, e: (unsendable if unsendable is not None else []).append((r, e)))
    _MADE.append(writer)
    return writer


def test_order_is_kept_when_the_loop_and_another_thread_send_at_once() -> None:
    ours, theirs = multiprocessing.Pipe()
    writer = _writer(ours)
    reader = _Reader(theirs)
    sent: list[int] = []
    order = threading.Lock()  # the order of the send() calls is the order to find at the other end

    def send(request: p.Request) -> None:
        with order:
            writer.send(request)
            sent.append(request.request_id)

    def pinger() -> None:
        for n in range(400):
            send(p.Ping(100_000 + n))
            if n % 50 == 0:
                time.sleep(0.001)

    async def loop_side() -> None:
        other = threading.Thread(target=pinger)
        other.start()
        for n in range(1, 61):
            send(_generate(n))  # big: the pipe is full while the other thread keeps sending
            send(p.Cancel(n))
            send(p.Ping(50_000 + n))
            await asyncio.sleep(0)
        other.join()
        send(p.Shutdown(999_999))

    asyncio.run(loop_side())
    reader.join()
    assert reader.ids == sent
    assert len(sent) == 60 * 3 + 400 + 1
    assert set(reader.sizes.values()) == {4 * IMAGE_BYTES}
    writer.close()
    assert writer.join(5)


def test_send_returns_before_the_other_end_reads() -> None:
    """Nobody reads yet: a direct conn.send of this request would block on the full pipe."""
    ours, theirs = multiprocessing.Pipe()
    writer = _writer(ours)
    started = time.perf_counter()
    writer.send(_generate(1, images=16))
    writer.send(p.Ping(2))
    writer.send(p.Shutdown(3))
    took = time.perf_counter() - started
    assert took < 0.05, f"send waited {took * 1000:.1f} ms for a pipe nobody reads"
    reader = _Reader(theirs)
    reader.join()
    assert reader.ids == [1, 2, 3] and reader.sizes == {1: 16 * IMAGE_BYTES}


def test_a_broken_pipe_is_reported_once_and_later_sends_raise() -> None:
    ours, theirs = multiprocessing.Pipe()
    broken: list[OSError] = []
    writer = _writer(ours, broken)
    writer.send(_generate(1))  # more than the pipe holds: the writer is inside this write
    time.sleep(0.2)
    theirs.close()
    assert writer.join(5), "the writer did not end when its pipe broke"
    assert len(broken) == 1 and isinstance(broken[0], OSError)
    with pytest.raises(BrokenPipeError):
        writer.send(p.Ping(2))


def test_a_request_that_cannot_be_pickled_is_reported_and_the_next_goes_through() -> None:
    ours, theirs = multiprocessing.Pipe()
    unsendable: list[tuple[p.Request, Exception]] = []
    writer = _writer(ours, unsendable=unsendable)
    reader = _Reader(theirs)
    bad = p.CountTokens(1, text=threading.Lock())  # type: ignore[arg-type]
    writer.send(bad)
    writer.send(p.Ping(2))
    writer.send(p.Shutdown(3))
    reader.join()
    assert reader.ids == [2, 3]
    assert [request for request, _ in unsendable] == [bad]
    assert isinstance(unsendable[0][1], TypeError)


def test_close_writes_what_was_queued_then_ends_and_refuses_more() -> None:
    ours, theirs = multiprocessing.Pipe()
    writer = _writer(ours)
    for n in range(1, 4):
        writer.send(_generate(n))
    writer.send(p.Shutdown(4))
    writer.close()
    reader = _Reader(theirs)
    reader.join()
    assert reader.ids == [1, 2, 3, 4]
    assert writer.join(5)
    with pytest.raises(BrokenPipeError):
        writer.send(p.Ping(5))


def test_an_images_bytes_go_into_the_pipe_uncopied() -> None:
    """The pickler hands each big bytes object over as it is: no 24 MB buffer is built (and
    no copy made holding the interpreter lock) before the write."""
    request = _generate(1, images=3)
    parts = pickled(request)
    images = request.messages[0].images
    assert all(any(part is image for part in parts) for image in images)
    assert sum(len(part) for part in parts) < 3 * IMAGE_BYTES + 4096


@pytest.mark.parametrize("text", ["", "x" * 100, "y" * 16_380, "z" * 70_000, "w" * 300_000])
def test_a_message_written_in_pieces_is_read_whole_by_recv(text: str) -> None:
    """Sizes around multiprocessing's own cut-offs (16 KB, the 64 KB frame), with and without images."""
    ours, theirs = multiprocessing.Pipe()
    for request in (p.CountTokens(1, text=text), p.Generate(2, (p.ChatMessage("user", text, images=(
            text.encode() * 2, b"\x89PNG" * 40_000)),))):
        done = threading.Thread(target=write_message, args=(ours, pickled(request)))
        done.start()  # a big one fills the pipe: the other end must read meanwhile
        assert theirs.recv() == request
        done.join(10)
    ours.close()
    with pytest.raises(EOFError):
        theirs.recv()


def test_on_windows_the_pieces_go_as_one_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Windows pipe is message mode: one send_bytes of the joined pieces (checked here on
    this system's pipe, the branch only)."""
    ours, theirs = multiprocessing.Pipe()
    request = _generate(1, images=1)
    sent: list[int] = []
    monkeypatch.setattr("app.service.models.pipe_writer.sys.platform", "win32")
    real = ours.send_bytes
    monkeypatch.setattr(ours, "send_bytes", lambda data: (sent.append(len(data)), real(data)))
    done = threading.Thread(target=write_message, args=(ours, pickled(request)))
    done.start()
    assert theirs.recv() == request
    done.join(10)
    assert len(sent) == 1 and sent[0] > IMAGE_BYTES
