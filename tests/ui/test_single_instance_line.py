"""The single-instance line (issue 39): `kestrel ask` and the plain-Python client reach the running
window's real QLocalServer; what is not a request of ours is dropped and the window keeps serving."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtNetwork import QLocalServer

from app.core import instance_line
from app.core.instance_line import (MAX_LINE_BYTES, MAX_QUESTION_CHARS, Delivery, Do, LineRequest, deliver,
                                    deliver_over_socket, encode_request, server_name, socket_path)
from app.core.paths import data_paths
from app.ui import single_instance
from app.ui.single_instance import SingleInstance
from tests.ui.conftest import run, until

pytestmark = pytest.mark.skipif(os.name == "nt", reason="the Unix-socket side; Windows' pipe client is tested on a fake "
                                                        "in tests/ui/test_single_instance_pipe.py")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary folder with a short path: a Unix socket's path may not pass ~104 bytes."""
    folder = Path(tempfile.mkdtemp(prefix="k39-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder)


@pytest.fixture
def window(loop, short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SingleInstance, list[str]]]:  # type: ignore[no-untyped-def]
    """The first window's line, listening in short_tmp (Qt's temporary folder through TMPDIR), and
    what it was asked: "activate", or "ask:" and the question."""
    monkeypatch.setenv("TMPDIR", str(short_tmp))
    first = SingleInstance(data_paths().ensure())
    heard: list[str] = []
    first.activated.connect(lambda: heard.append("activate"))
    first.askRequested.connect(lambda question: heard.append(f"ask:{question}"))
    assert first.acquire()
    yield first, heard
    first.release()


def send(loop, request: LineRequest) -> Delivery:  # type: ignore[no-untyped-def]
    """The plain-Python client, on a thread as from another process; this thread's Qt events serve it."""
    return run(loop, asyncio.to_thread(deliver, data_paths(), request))


def raw(loop, data: bytes) -> bytes:  # type: ignore[no-untyped-def]
    """Write data as a hostile local client would and read what comes back until the window closes."""
    def exchange() -> bytes:
        line = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        line.settimeout(10)
        line.connect(str(socket_path(server_name(data_paths()))))
        try:
            line.sendall(data)
            back = b""
            while chunk := line.recv(4096):
                back += chunk
            return back
        except (BrokenPipeError, ConnectionResetError):
            return b"(dropped)"
        finally:
            line.close()

    return run(loop, asyncio.to_thread(exchange))


@pytest.mark.parametrize("tmpdir", ["short", "short with a slash", "a link to short", "unset", "empty"])
def test_the_client_finds_the_socket_where_qt_puts_it(qapp, short_tmp: Path, monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
                                                      tmpdir: str) -> None:
    (short_tmp / "real").mkdir()
    (short_tmp / "link").symlink_to(short_tmp / "real")
    given = {"short": str(short_tmp / "real"), "short with a slash": f"{short_tmp / 'real'}/",
             "a link to short": str(short_tmp / "link"), "empty": ""}.get(tmpdir)
    if given is None:
        monkeypatch.delenv("TMPDIR", raising=False)
    else:
        monkeypatch.setenv("TMPDIR", given)
    name = f"kestrel-test-{os.getpid()}"
    server = QLocalServer()
    server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
    assert server.listen(name), server.errorString()
    try:
        assert os.path.samefile(socket_path(name), server.fullServerName())
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.settimeout(2)
        probe.connect(str(socket_path(name)))  # the very socket Qt listens on
        probe.close()
    finally:
        server.close()


def test_ask_and_activate_from_the_plain_client(window, loop) -> None:  # type: ignore[no-untyped-def]
    _, heard = window
    assert send(loop, LineRequest(Do.ASK, "hello")) is Delivery.HEARD
    assert send(loop, LineRequest(Do.ACTIVATE)) is Delivery.HEARD
    assert send(loop, LineRequest(Do.ASK, "")) is Delivery.HEARD
    question = "Ünïcode 🦅 and \"quotes\"\nover two lines " + "x" * (MAX_QUESTION_CHARS - 60)
    assert send(loop, LineRequest(Do.ASK, question)) is Delivery.HEARD
    assert heard == ["ask:hello", "activate", "ask:", f"ask:{question}"]


def test_kestrel_ask_from_another_process_summons_the_window(window, loop) -> None:  # type: ignore[no-untyped-def]
    _, heard = window
    for given, expected in ((["hello"], "ask:hello"), ([], "ask:")):
        launch = subprocess.Popen([sys.executable, "-m", "app", "ask", *given], cwd=ROOT, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        run(loop, until(lambda: launch.poll() is not None, timeout=30, what="kestrel ask to end"))
        out, err = launch.communicate()
        assert (launch.returncode, out, err) == (0, "", "")
        assert heard[-1] == expected


def test_what_is_not_a_request_is_dropped_and_the_window_keeps_serving(window, loop,  # type: ignore[no-untyped-def]
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(single_instance, "_LINE_TIMEOUT_MS", 60_000)  # the size bound alone cuts it off
    _, heard = window
    started = time.monotonic()
    assert raw(loop, b"x" * (MAX_LINE_BYTES + 100)) in (b"", b"(dropped)"), "an endless line is cut off unanswered"
    assert time.monotonic() - started < 5
    assert raw(loop, b"\x00\xff garbage\n") == b""
    assert raw(loop, b"activate\n") == b"", "the old one-word protocol is gone"
    assert raw(loop, b'["v", 1]\n') == b""
    assert raw(loop, b'{"v":1,"do":"ask","question":12}\n') == b""
    assert raw(loop, b"[" * 100_000 + b"\n") == b"", "nesting past the parser's depth"
    too_long = encode_request(LineRequest(Do.ASK, "x" * MAX_QUESTION_CHARS)).replace(b'"x', b'"xx', 1)
    assert raw(loop, too_long) == b""
    assert raw(loop, b'{"v":2,"do":"ask","question":"hi"}\n') == b'{"ok":false,"v":1}\n', "another version is told"
    assert raw(loop, b'{"v":1,"do":"explode"}\n') == b'{"ok":false,"v":1}\n'
    assert heard == []
    assert send(loop, LineRequest(Do.ASK, "still there?")) is Delivery.HEARD
    assert heard == ["ask:still there?"]


def test_connections_that_never_send_are_dropped(window, loop, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    # Long enough that a busy machine does not drop the idle ones before the crowded one is tried (300 ms did, in
    # CI), short enough to wait out.
    monkeypatch.setattr(single_instance, "_LINE_TIMEOUT_MS", 3000)
    _, heard = window
    path = str(socket_path(server_name(data_paths())))
    idle = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(single_instance._MAX_OPEN)]
    try:
        for line in idle:
            line.connect(path)
        run(loop, asyncio.sleep(0.1))
        assert send(loop, LineRequest(Do.ASK, "crowded")) is not Delivery.HEARD, "the open connections are bounded"
        run(loop, asyncio.sleep(3.5))  # past the line timeout: the idle ones are gone
        for line in idle:
            line.settimeout(1)
            assert line.recv(16) == b""
        assert send(loop, LineRequest(Do.ASK, "room now")) is Delivery.HEARD
        assert heard == ["ask:room now"]
    finally:
        for line in idle:
            line.close()


def test_no_hang_when_nothing_listens(short_tmp: Path) -> None:
    dead = short_tmp / "kestrel-0123456789abcdef"
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(str(dead))  # as a killed window leaves it
    left.close()
    started = time.monotonic()
    assert deliver_over_socket(dead, b"{}\n", 2.0) is Delivery.NOT_RUNNING
    assert deliver_over_socket(short_tmp / "kestrel-none", b"{}\n", 2.0) is Delivery.NOT_RUNNING
    assert time.monotonic() - started < 0.5
    stuck = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # a window whose UI thread is stuck:
    stuck.bind(str(short_tmp / "stuck"))                      # it listens, never reads
    stuck.listen()
    try:
        started = time.monotonic()
        assert deliver_over_socket(short_tmp / "stuck", b"{}\n", 0.5) is Delivery.NO_ANSWER
        assert time.monotonic() - started < 1.5
    finally:
        stuck.close()


def test_a_question_past_the_bound_is_refused_with_words() -> None:
    with pytest.raises(instance_line.QuestionTooLong, match="16,001 characters long; kestrel ask takes up to 16,000"):
        encode_request(LineRequest(Do.ASK, "x" * (MAX_QUESTION_CHARS + 1)))
