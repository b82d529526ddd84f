"""One window per Kestrel home: a second launch brings the first window forward.

Two windows on one history would each think the other's streaming answer was cut off
by a crash (the start-up recovery marks answers left streaming as interrupted), and
would write the same settings. So the first window holds an OS lock in the data
folder for its life and listens on a local socket (a Unix socket; a named pipe on
Windows, for this user only); a second launch finds the lock taken, asks the first to
come forward, and exits. A crashed first window releases the lock with its process.
`kestrel ask` talks over the same line; its protocol and plain-Python client are
app/core/instance_line.py.
"""

from __future__ import annotations

import os
import re
import socket
import stat
import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QDir, QObject, QTimer, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

from app.core.files import HeldLock, try_hold_lock
from app.core.instance_line import (ANSWER_TIMEOUT_S, MAX_LINE_BYTES, Delivery, Do, LineRequest, answer_of,
                                    encode_request, read_request, server_name)
from app.core.paths import DataPaths
from app.core.window_handover import WINDOW_LOCK

__all__ = ["SingleInstance", "remove_stale_sockets", "server_name"]

# server_name()'s names, and only those: other things called kestrel-… are not ours to judge.
_OURS = re.compile(r"kestrel-[0-9a-f]{16}")
# A socket younger than this may be a window's that is starting: bound, not yet listening.
_SETTLE_S = 60.0
# A client has this long to send its line; a connection held open longer is dropped.
_LINE_TIMEOUT_MS = 5000
# Connections read at once; more are dropped (only this user can connect, but a loop that
# connects and never writes must not make the window hold without end).
_MAX_OPEN = 8


class SingleInstance(QObject):
    """acquire() once at start; activated fires when another launch asks for the window,
    askRequested(question) when `kestrel ask` asks for the quick-ask window ("" to just
    summon it)."""

    activated = Signal()
    askRequested = Signal(str)

    def __init__(self, paths: DataPaths, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._lock_path = paths.data / WINDOW_LOCK
        self._name = server_name(paths)
        self._held: HeldLock | None = None
        self._server: QLocalServer | None = None
        self._open: list[_LineReader] = []

    def acquire(self) -> bool:
        """True if this is the first window (it now listens); False if another runs."""
        self._held = try_hold_lock(self._lock_path)
        if self._held is None:
            return False
        # The lock is ours, so a socket left under this name is a crashed window's.
        QLocalServer.removeServer(self._name)
        remove_stale_sockets(Path(QDir.tempPath()))  # other homes' crashed windows'; no one else clears them
        server = self._server = QLocalServer(self)
        server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        server.newConnection.connect(self._on_connection)
        server.listen(self._name)  # if it fails, the window still runs; a second launch waits, then says so
        return True

    def ask_first_to_come_forward(self, timeout_s: float = 5.0) -> bool:
        """From a second launch: ask the running window to show itself. False if it did
        not answer in time (it may still be starting, or be stuck)."""
        deadline = time.monotonic() + timeout_s
        request = encode_request(LineRequest(Do.ACTIVATE))
        while time.monotonic() < deadline:
            # Qt's own client here, not instance_line's: the window's hand-over keeps to
            # QLocalSocket, which Qt maintains on Windows' named pipes too.
            line = QLocalSocket()
            line.connectToServer(self._name)
            if line.waitForConnected(500):
                line.write(request)
                # The answer waits as long as there is time: a window that listens but is still building
                # hears this connection the moment its event loop runs (a new one each 2 s was heard late).
                left_s = max(ANSWER_TIMEOUT_S, deadline - time.monotonic())
                heard = line.waitForBytesWritten(1000) and _answer_within(line, left_s)
                line.disconnectFromServer()
                if heard:
                    return True
            time.sleep(0.1)
        return False

    def release(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._held is not None:
            self._held.release()
            self._held = None

    def _on_connection(self) -> None:
        server = self._server
        if server is None:
            return
        while server.hasPendingConnections():
            # A child of the server: it goes when the server does (no deleteLater racing
            # the server's own deletion).
            line = server.nextPendingConnection()
            if len(self._open) >= _MAX_OPEN:
                line.abort()
                continue
            reader = _LineReader(line, self._on_request)
            self._open.append(reader)
            reader.finished.connect(lambda reader=reader: self._open.remove(reader))
            reader.start()

    def _on_request(self, request: LineRequest) -> None:
        if request.do is Do.ASK:
            self.askRequested.emit(request.question)
        else:
            self.activated.emit()


class _LineReader(QObject):
    """Reads one request line from a connection, at most MAX_LINE_BYTES, within
    _LINE_TIMEOUT_MS; answers, acts, and closes. Anything else is dropped unanswered."""

    finished = Signal()

    def __init__(self, line: QLocalSocket, act: Callable[[LineRequest], None]) -> None:
        super().__init__(line)  # goes with its connection
        self._line = line
        self._act = act
        self._buffer = bytearray()
        self._done = False

    def start(self) -> None:
        line = self._line
        line.setReadBufferSize(MAX_LINE_BYTES + 1)  # Qt's own buffer bounded too
        line.readyRead.connect(self._read)
        line.disconnected.connect(self._end)
        QTimer.singleShot(_LINE_TIMEOUT_MS, self, self._drop)
        if line.bytesAvailable():
            self._read()

    def _read(self) -> None:
        if self._done:
            return
        self._buffer += bytes(self._line.readAll().data())
        end = self._buffer.find(b"\n")
        if end < 0:
            if len(self._buffer) > MAX_LINE_BYTES:
                self._drop()  # a line longer than any request: not ours
            return
        reading = read_request(bytes(self._buffer[:end]))
        self._done = True
        if reading.answer is not None:
            self._line.write(reading.answer)
        self._line.disconnectFromServer()  # after what was written is sent
        if reading.request is not None:
            self._act(reading.request)
        self._end()

    def _drop(self) -> None:
        if not self._done:
            self._done = True
            self._line.abort()
        self._end()

    def _end(self) -> None:
        self._done = True
        if not self.signalsBlocked():
            self.finished.emit()
            self.blockSignals(True)  # once


def _answer_within(line: QLocalSocket, timeout_s: float) -> bool:
    """Whether the window answered that it heard (a second launch's wait, in the second process)."""
    deadline = time.monotonic() + timeout_s
    answer = b""
    while b"\n" not in answer and len(answer) < 256:
        if not line.bytesAvailable():  # it may have come while the request was written
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0 or not line.waitForReadyRead(left_ms):
                return False
        answer += bytes(line.readAll().data())
    return answer_of(answer.split(b"\n", 1)[0]) is Delivery.HEARD


def remove_stale_sockets(folder: Path) -> list[Path]:
    """Remove the sockets windows of any Kestrel home left in folder (Qt's temporary folder)
    when they ended without closing (killed, crashed, a power cut); the removed ones.

    Each window removes a stale socket of its own name, but one of a home no longer used
    (a test's, a moved data folder's) would stay for ever. Only a socket under
    server_name()'s pattern, of this user, older than _SETTLE_S and on which no process
    listens is removed: anything else (a link, which is never followed; a file; another
    user's; a live window's) stays. The socket is looked at again just before unlink, which
    removes a name and never follows a link, so one replaced meanwhile stays too.
    Nothing on Windows, where Qt's local sockets are named pipes that end with their process.
    """
    if os.name == "nt" or not hasattr(socket, "AF_UNIX"):
        return []
    try:
        with os.scandir(folder) as listing:
            candidates = [Path(entry.path) for entry in listing if _OURS.fullmatch(entry.name)]
    except OSError:
        return []
    removed = []
    for path in candidates:
        try:
            before = os.lstat(path)
            if not _stale(path, before):
                continue
            after = os.lstat(path)
            if (after.st_dev, after.st_ino, after.st_mode) != (before.st_dev, before.st_ino, before.st_mode):
                continue
            os.unlink(path)
        except OSError:
            continue  # gone already, or not ours to remove
        removed.append(path)
    return removed


def _stale(path: Path, status: os.stat_result) -> bool:
    """Whether path (lstat'ed as status) is this user's socket, settled, that no one listens on."""
    if not stat.S_ISSOCK(status.st_mode) or status.st_uid != os.getuid():
        return False
    if time.time() - status.st_mtime < _SETTLE_S:
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
    except ConnectionRefusedError:
        return True  # the process that bound it is gone
    except OSError:
        return False  # busy, timed out, or not ours to judge
    finally:
        probe.close()
    return False  # a live window: it reads nothing from this connection and drops it
