"""Kestrel in the tray: while the main window is hidden there, an icon to ask, open the window or quit."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QIcon, QKeySequence
from PySide6.QtWidgets import QMenu, QSystemTrayIcon

# How long the once-said words stay up (ms): long enough to read three short sentences.
_TOLD_FOR_MS = 15_000


class KestrelTray(QObject):
    """The tray icon, shown while the main window waits hidden in the tray.

    icon: makes Kestrel's icon (once, when the tray first shows). `shown` says whether the
    window waits in the tray now. Signals: askRequested ("Ask…": the quick-ask window),
    openRequested ("Open Kestrel", or a click on the icon), quitRequested ("Quit").
    """

    askRequested = Signal()
    openRequested = Signal()
    quitRequested = Signal()

    def __init__(self, icon: Callable[[], QIcon], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._icon = icon
        self.icon: QSystemTrayIcon | None = None  # made the first time it is needed
        self.menu: QMenu | None = None
        self.shown = False

    def show(self, tooltip: str) -> None:
        """The window went away: the icon stays."""
        icon = self._made()
        icon.setToolTip(tooltip)
        self.shown = True
        icon.show()

    def set_tooltip(self, tooltip: str) -> None:
        if self.icon is not None:
            self.icon.setToolTip(tooltip)

    def tell(self, title: str, words: str) -> None:
        """A balloon (a notification on most Linux desktops) from the icon, which must be shown."""
        if self.icon is not None:
            self.icon.showMessage(title, words, QSystemTrayIcon.MessageIcon.Information, _TOLD_FOR_MS)

    def hide(self) -> None:
        """The window is back (or Kestrel is quitting): no icon."""
        self.shown = False
        if self.icon is not None:
            self.icon.hide()

    def _made(self) -> QSystemTrayIcon:
        if self.icon is None:
            self.icon = QSystemTrayIcon(self._icon(), self)
            self.menu = QMenu()
            self.menu.addAction("&Ask…").triggered.connect(self.askRequested)
            self.menu.addAction("&Open Kestrel").triggered.connect(self.openRequested)
            self.menu.addSeparator()
            self.menu.addAction("&Quit").triggered.connect(self.quitRequested)
            self.icon.setContextMenu(self.menu)
            self.icon.activated.connect(self._activated)
        return self.icon

    def _activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason in (QSystemTrayIcon.ActivationReason.Trigger, QSystemTrayIcon.ActivationReason.DoubleClick):
            self.openRequested.emit()


def tray_available() -> bool:
    """Whether the desktop shows tray icons: offscreen and some Linux desktops show none, and a
    window hidden with no icon could never come back."""
    return QSystemTrayIcon.isSystemTrayAvailable()


def tray_tooltip(server_words: str) -> str:
    """The icon's tooltip: where the API server listens while it serves."""
    return f"Kestrel: {server_words}" if server_words else "Kestrel"


def still_running_words(*, quick_ask: bool, shortcut: str, shortcut_held: bool, server_words: str) -> str:
    """What the icon says the first time the window goes to the tray: why Kestrel stays, and how to quit.

    shortcut: Qt's portable text (settings.json), shown as this desktop writes it.
    """
    if quick_ask and shortcut and shortcut_held:
        native = QKeySequence.fromString(shortcut, QKeySequence.SequenceFormat.PortableText).toString(
            QKeySequence.SequenceFormat.NativeText)
        why = f"Kestrel keeps running here for quick ask: press {native} in any program to ask."
    elif quick_ask:
        why = "Kestrel keeps running here for quick ask: choose Ask… in this icon's menu to ask."
    else:
        why = f"Kestrel keeps running here so the API server goes on serving ({server_words})."
    return f"{why} To quit, choose Quit in this icon's menu, or File → Quit in Kestrel's window."
