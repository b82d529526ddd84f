"""One window per Kestrel home: a second launch brings the first window forward.

Two windows on one history would each think the other's streaming answer was cut off
by a crash (the start-up recovery marks answers left streaming as interrupted), and
would write the same settings. So the first window holds an OS lock in the data
folder for its life and listens on a local socket (a Unix socket; a named pipe on
Windows, for this user only); a second launch finds the lock taken, asks the first to
come forward, and exits. A crashed first window releases the lock with its process.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import stat
import time
from pathlib import Path

from PySide6.QtCore import QDir, QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

from app.core.files import HeldLock, try_hold_lock
from app.core.paths import DataPaths

_ACTIVATE = b"activate\n"
# server_name()'s names, and only those: other things called kestrel-… are not ours to judge.
_OURS = re.compile(r"kestrel-[0-9a-f]{16}")
# A socket younger than this may be a window's that is starting: bound, not yet listening.
_SETTLE_S = 60.0


def server_name(paths: DataPaths) -> str:
    """The local socket's name: one per data folder (and so per user)."""
    digest = hashlib.sha256(str(paths.data.resolve()).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"kestrel-{digest}"


class SingleInstance(QObject):
    """acquire() once at start; activated fires when another launch asks for the window."""

    activated = Signal()

    def __init__(self, paths: DataPaths, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._lock_path = paths.data / ".window.lock"
        self._name = server_name(paths)
        self._held: HeldLock | None = None
        self._server: QLocalServer | None = None

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
        while time.monotonic() < deadline:
            socket = QLocalSocket()
            socket.connectToServer(self._name)
            if socket.waitForConnected(500):
                socket.write(_ACTIVATE)
                sent = socket.waitForBytesWritten(1000)
                socket.disconnectFromServer()
                if sent:
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
            socket = server.nextPendingConnection()
            socket.readyRead.connect(self._on_ready_read)
            if socket.bytesAvailable():
                self._read(socket)

    def _on_ready_read(self) -> None:
        socket = self.sender()
        if isinstance(socket, QLocalSocket):
            self._read(socket)

    def _read(self, socket: QLocalSocket) -> None:
        if bytes(socket.readAll().data()).startswith(_ACTIVATE.strip()):
            self.activated.emit()
        socket.disconnectFromServer()


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
