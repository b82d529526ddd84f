"""`kestrel ask` on Windows: the line is a named pipe opened as a file, on a fake (this machine has no
Windows).

The fake follows the documented behaviour of CreateFile and ReadFile on a named pipe
(learn.microsoft.com, "Named Pipe Client"): opening a name no server serves fails with
ERROR_FILE_NOT_FOUND (FileNotFoundError in Python), one whose instances are all taken with
ERROR_PIPE_BUSY (an OSError), and a read waits until the server writes. It is not recorded
from a real machine: the path is untested on a real Windows desktop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from app.core import instance_line
from app.core.instance_line import Delivery, Do, LineRequest, deliver, encode_request, server_name
from app.core.paths import data_paths

ERROR_PIPE_BUSY = 231


class FakePipe:
    """One client end of a Qt QLocalServer's named pipe: what was written, and the window's answer."""

    def __init__(self, answer: bytes | None, released: threading.Event) -> None:
        self.written = b""
        self.closed = False
        self._answer = answer  # None: a window whose UI thread is stuck, which never answers
        self._released = released

    def write(self, data: bytes, /) -> int:
        self.written += data
        return len(data)

    def read(self, size: int = -1, /) -> bytes:
        if self._answer is None:
            self._released.wait()  # ReadFile blocks until the server writes or goes away
            return b""
        answer, self._answer = self._answer[:size], self._answer[size:]
        return answer

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def released() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # a stuck read left behind ends with the test


def windows_with(monkeypatch: pytest.MonkeyPatch, opener: Callable[[str], FakePipe]) -> list[str]:
    """Make instance_line take its Windows path onto opener; the paths it opened."""
    opened: list[str] = []

    def open_pipe(path: str) -> FakePipe:
        opened.append(path)
        return opener(path)

    monkeypatch.setattr(instance_line, "_on_windows", lambda: True)
    monkeypatch.setattr(instance_line, "open_pipe", open_pipe)
    return opened


def test_the_request_goes_down_qts_pipe_and_the_answer_comes_back(monkeypatch: pytest.MonkeyPatch,
                                                                  released: threading.Event) -> None:
    pipe = FakePipe(b'{"ok":true}\n', released)
    opened = windows_with(monkeypatch, lambda _: pipe)
    assert deliver(data_paths(), LineRequest(Do.ASK, "hello")) is Delivery.HEARD
    assert opened == ["\\\\.\\pipe\\" + server_name(data_paths())]
    assert pipe.written == encode_request(LineRequest(Do.ASK, "hello")) and pipe.closed


def test_no_server_is_not_running(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(path: str) -> FakePipe:
        raise FileNotFoundError(2, "The system cannot find the file specified", path)

    windows_with(monkeypatch, missing)
    started = time.monotonic()
    assert deliver(data_paths(), LineRequest(Do.ACTIVATE)) is Delivery.NOT_RUNNING
    assert time.monotonic() - started < 0.5


def test_a_busy_pipe_is_tried_again(monkeypatch: pytest.MonkeyPatch, released: threading.Event) -> None:
    tries: list[int] = []

    def busy_once(path: str) -> FakePipe:
        tries.append(1)
        if len(tries) == 1:
            raise OSError(ERROR_PIPE_BUSY, "All pipe instances are busy")
        return FakePipe(b'{"ok":false,"v":1}\n', released)

    windows_with(monkeypatch, busy_once)
    assert deliver(data_paths(), LineRequest(Do.ASK, "")) is Delivery.NOT_UNDERSTOOD
    assert len(tries) == 2


def test_a_window_that_never_answers_does_not_hold_the_command(monkeypatch: pytest.MonkeyPatch,
                                                               released: threading.Event) -> None:
    windows_with(monkeypatch, lambda _: FakePipe(None, released))
    started = time.monotonic()
    assert deliver(data_paths(), LineRequest(Do.ASK, "hello"), timeout_s=0.5) is Delivery.NO_ANSWER
    assert time.monotonic() - started < 1.5
