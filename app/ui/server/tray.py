"""Serving from the tray: with the API server on and the setting chosen, closing the window only hides it."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QMenu, QSystemTrayIcon

from app.ui.server.server_host import ServerHost
from app.ui.server.server_window import status_words


class ServerTray(QObject):
    """The tray icon while the window is hidden and the server keeps serving.

    icon: makes Kestrel's icon (once, when the tray first shows). `keeps_serving()` says whether closing the window should hide it instead (the server
    is on, `tray_on_close` is set, and the desktop has a tray: offscreen and some Linux
    desktops have none, and a hidden window with no icon could never come back).
    Signals: openRequested ("Open Kestrel", or a click on the icon), quitRequested.
    """

    openRequested = Signal()
    quitRequested = Signal()

    def __init__(self, host: ServerHost, tray_on_close: Callable[[], bool], icon: Callable[[], QIcon],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._host = host
        self._tray_on_close = tray_on_close
        self._icon = icon
        self.icon: QSystemTrayIcon | None = None  # made the first time it is needed
        self.menu: QMenu | None = None
        self.serving_from_tray = False

    def keeps_serving(self) -> bool:
        return (self._host.on and self._tray_on_close()
                and QSystemTrayIcon.isSystemTrayAvailable())

    def show(self) -> None:
        """The window went away: the icon stays, saying where the server listens."""
        if self.icon is None:
            self.icon = QSystemTrayIcon(self._icon(), self)
            self.menu = QMenu()
            self.menu.addAction("&Open Kestrel").triggered.connect(self.openRequested)
            self.menu.addSeparator()
            self.menu.addAction("&Quit").triggered.connect(self.quitRequested)
            self.icon.setContextMenu(self.menu)
            self.icon.activated.connect(self._activated)
        words = status_words(self._host)
        self.icon.setToolTip(f"Kestrel: {words}" if words else "Kestrel")
        self.serving_from_tray = True
        self.icon.show()

    def hide(self) -> None:
        """The window is back (or Kestrel is quitting): no icon."""
        self.serving_from_tray = False
        if self.icon is not None:
            self.icon.hide()

    def _activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason in (QSystemTrayIcon.ActivationReason.Trigger, QSystemTrayIcon.ActivationReason.DoubleClick):
            self.openRequested.emit()
