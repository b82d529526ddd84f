"""The window's API server: started, restarted and stopped as the settings say, on the window's own loop."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QObject, Signal

from app.core.server_settings import LOOPBACK, ServerSettings, is_loopback

if TYPE_CHECKING:
    from app.server.runner import ServerState
    from app.service.api.api_answers import ApiAnswers
    from app.service.doors.settings import SettingsDoor
    from app.ui.state.adapter import ServiceAdapter

# What the server reads only when it starts (it reads the key and the rest at each request):
# a change to one of these restarts it.
_READ_AT_START = ("host", "port", "listen_beyond_this_pc", "cors_origins")
# The same for the sharing server (Kestrel Link).
_SHARE_READ_AT_START = ("share_host", "share_port")


class Server(Protocol):
    """What the window needs of app.server.runner.ApiServer (tests give it a stand-in)."""

    state: "ServerState"
    address: str
    error: str

    async def start(self) -> bool: ...

    async def stop(self) -> None: ...


ServerFactory = Callable[["ApiAnswers", Callable[[], ServerSettings], Callable[[], None]], Server]


def api_server(answers: "ApiAnswers", settings: Callable[[], ServerSettings], on_change: Callable[[], None]) -> Server:
    """The real server (tests put a stand-in here before the window is built).

    Imported here, not at the top: the runner brings uvicorn and every route (about 0.2 s),
    which a window whose server is off (the default) never needs.
    """
    from app.server.runner import ApiServer

    return ApiServer(answers, settings, on_change=on_change)


def sharing_server(answers: "ApiAnswers", settings: Callable[[], ServerSettings], on_change: Callable[[], None]
                   ) -> Server:
    """Kestrel Link's sharing server (its certificate made first if need be: OSError when it cannot be kept).

    Imported here for the same reason as api_server."""
    from app.core.paths import data_paths
    from app.server.link.files import LinkFiles
    from app.server.link.sharing import sharing_server as shared

    return shared(LinkFiles.at(data_paths()), answers, settings, on_change=on_change)


class ServerHost(QObject):
    """Keeps one ApiServer in step with `settings.server`: the settings are the only switch.

    Follows every SettingsChanged (the one at start-up included): turned on, it saves a
    key first if there is none (`with_key()`), then starts; a change the server reads at
    start (host, port, origins) restarts it; the key and the rest it reads at each request.
    Turned off, it stops. One change
    is carried out at a time, in order; the UI thread never waits for a socket.
    It keeps Kestrel Link's sharing server the same way, following server.share (sharing_* below).
    Signal: changed (read on, starting, failed, address, error, listening_beyond, sharing_*).
    """

    changed = Signal()

    def __init__(self, adapter: "ServiceAdapter", settings: "SettingsDoor", api: "ApiAnswers",
                 parent: QObject | None = None, *, make_server: ServerFactory | None = None,
                 make_shared: ServerFactory | None = None) -> None:
        super().__init__(parent)
        self._adapter = adapter
        self._settings, self._api = settings, api
        self._make = make_server or api_server
        self._make_shared = make_shared or sharing_server
        self._server: Server | None = None
        self._running: ServerSettings | None = None  # what the server was started with
        self._shared: Server | None = None
        self._sharing_with: ServerSettings | None = None
        self._share_error = ""  # the certificate could not be made or kept
        self._lock = asyncio.Lock()
        self._closed = False
        adapter.settingsChanged.connect(self.follow_settings)

    def _is(self, state: str) -> bool:
        # ServerState's values, read without importing the runner (see api_server).
        return self._server is not None and self._server.state.value == state

    @property
    def on(self) -> bool:
        """The server answers requests."""
        return self._is("on")

    @property
    def starting(self) -> bool:
        return self._is("starting")

    @property
    def failed(self) -> bool:
        """The last start failed (`error` says why); retry() tries again."""
        return self._is("failed")

    @property
    def address(self) -> str:
        """"http://127.0.0.1:8765" while on; "" otherwise."""
        return self._server.address if self._server is not None and self.on else ""

    @property
    def error(self) -> str:
        return self._server.error if self._server is not None and self.failed else ""

    @property
    def listening_beyond(self) -> bool:
        """The server is reachable from other machines (it listens on more than loopback)."""
        running = self._running
        return (self.on or self.starting) and running is not None and not is_loopback(running.host)

    def host_port(self) -> str:
        """The address without its scheme, as the status line says it: "127.0.0.1:8765"."""
        return self.address.split("://", 1)[-1].rstrip("/")

    @property
    def on_every_address(self) -> bool:
        """It listens on all of this PC's addresses (0.0.0.0 or ::), not on one."""
        return self.host_port().rpartition(":")[0] in ("0.0.0.0", "[::]")

    @property
    def client_address(self) -> str:
        """The address a client on this PC uses: 0.0.0.0 is no address to connect to (Windows refuses it)."""
        if not self.on_every_address:
            return self.address
        return f"http://{'[::1]' if self.host_port().startswith('[') else LOOPBACK}:{self.port}"

    @property
    def port(self) -> int:
        return int(self.host_port().rpartition(":")[2] or 0)

    def _sharing_is(self, state: str) -> bool:
        return self._shared is not None and self._shared.state.value == state

    @property
    def sharing_on(self) -> bool:
        """Kestrel Link's sharing server answers paired devices."""
        return self._sharing_is("on")

    @property
    def sharing_starting(self) -> bool:
        return self._sharing_is("starting")

    @property
    def sharing_error(self) -> str:
        """Why sharing could not start ("" when it did, or was not asked to)."""
        if self._share_error:
            return self._share_error
        return self._shared.error if self._shared is not None and self._sharing_is("failed") else ""

    @property
    def shared_address(self) -> str:
        """"https://192.168.1.20:8766" while sharing; "" otherwise."""
        return self._shared.address if self._shared is not None and self.sharing_on else ""

    def follow_settings(self) -> None:
        if not self._closed:
            self._adapter.spawn(self.follow())

    def retry(self) -> None:
        """Start again after a failure (the port may be free now)."""
        if not self._closed:
            self._adapter.spawn(self.follow(again=True))

    async def follow(self, *, again: bool = False) -> None:
        """Bring the server in line with the settings now (again: restart even if they match)."""
        async with self._lock:
            if self._closed:
                return
            door = self._settings
            wanted = door.settings.server
            if wanted.enabled and not wanted.key:
                # The key is kept before any client can see the server, so it never changes under one.
                await door.update_settings(dataclasses.replace(door.settings, server=wanted.with_key()))
                wanted = door.settings.server
            if self._server is not None and (again or not wanted.enabled or _restart_needed(self._running, wanted)):
                await self._stop()
            if wanted.enabled and self._server is None:
                await self._start(wanted)
            elif self._server is not None:
                self._running = wanted  # only what the server reads at each request changed
            await self._follow_sharing(wanted, again)

    async def _follow_sharing(self, wanted: ServerSettings, again: bool) -> None:
        shared = self._shared
        if shared is not None and (again or not wanted.share or _restart_needed(self._sharing_with, wanted,
                                                                                _SHARE_READ_AT_START)):
            await self._stop_sharing()
        if not wanted.share:
            self._share_error = ""
        elif self._shared is None:
            door = self._settings
            try:
                # Off the UI thread: the certificate may be made now (a key pair, two files).
                self._shared = await asyncio.to_thread(self._make_shared, self._api, lambda: door.settings.server,
                                                       self.changed.emit)
            except OSError as exc:
                self._share_error = (f"Kestrel could not make or keep its certificate for sharing ({exc.strerror or exc}). "
                                     "Check that Kestrel's data folder is writable, then try again.")
                self.changed.emit()
                return
            self._share_error = ""
            self._sharing_with = wanted
            self.changed.emit()
            await self._shared.start()
            self.changed.emit()

    async def stop(self) -> None:
        """Stop for good (the window is closing): after this, settings changes start nothing."""
        self._closed = True
        async with self._lock:
            await self._stop()
            await self._stop_sharing()

    async def _start(self, wanted: ServerSettings) -> None:
        door = self._settings
        self._running = wanted
        self._server = self._make(self._api, lambda: door.settings.server, self.changed.emit)
        self.changed.emit()
        await self._server.start()
        self.changed.emit()

    async def _stop(self) -> None:
        """Stop the server; until its socket is closed it says so itself (its state)."""
        server = self._server
        if server is not None:
            await server.stop()
            self._server, self._running = None, None
            self.changed.emit()


    async def _stop_sharing(self) -> None:
        shared = self._shared
        if shared is not None:
            await shared.stop()
            self._shared, self._sharing_with = None, None
            self.changed.emit()


def _restart_needed(running: ServerSettings | None, wanted: ServerSettings,
                    read_at_start: tuple[str, ...] = _READ_AT_START) -> bool:
    if running is None:
        return True
    return any(getattr(running, name) != getattr(wanted, name) for name in read_at_start)
