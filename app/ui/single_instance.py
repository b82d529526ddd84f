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
import time

from PySide6.QtCore import QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

from app.core.files import HeldLock, try_hold_lock
from app.core.paths import DataPaths

_ACTIVATE = b"activate\n"


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
