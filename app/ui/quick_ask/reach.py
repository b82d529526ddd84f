"""QuickAskReach: every way to the quick-ask window, and the global shortcut following the settings."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from app.core.quick_ask_settings import QuickAskSettings
from app.ui.quick_ask.quick_window import QuickAskWindow
from app.ui.quick_ask.shortcuts.shortcut import GlobalShortcut, ShortcutStatus

OFF = ShortcutStatus(False, "Quick ask is off: turn it on in Settings → Quick ask to open it with a shortcut.")


class QuickAskReach(QObject):
    """The quick-ask window is summoned by its global shortcut, by `kestrel ask` or a second launch
    (the single-instance line), and by the tray's Ask…; each of those is connected to `summon`.

    `follow(settings)` binds the shortcut while `quick_ask.enabled`, rebinds it when it changes, and
    releases it when quick ask is turned off; `statusChanged` (a ShortcutStatus) says each time
    whether the shortcut is Kestrel's, in words (the Settings page and the window show them).
    `kestrel ask` and the tray's Ask… reach the window even with quick ask off: the person asked.
    """

    statusChanged = Signal(object)

    def __init__(self, window: QuickAskWindow, shortcut: GlobalShortcut, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.window = window
        self.shortcut = shortcut
        self._bound: str | None = None  # the sequence asked of the shortcut; None: released
        self.status = OFF
        shortcut.activated.connect(self.summon)
        shortcut.statusChanged.connect(self._heard)

    def follow(self, settings: QuickAskSettings) -> None:
        """Quick ask's settings as they are now (at start and after each change)."""
        wanted = settings.shortcut if settings.enabled and settings.shortcut.strip() else None
        if wanted == self._bound:
            return
        self._bound = wanted
        if wanted is None:
            self.shortcut.release()
            self._heard(OFF)
        else:
            self.shortcut.bind(wanted)  # its status comes back through statusChanged

    def summon(self, question: str = "") -> None:
        self.window.summon(question)

    def release(self) -> None:
        """Kestrel quits: the keys go back to the desktop."""
        self._bound = None
        self.shortcut.release()

    def _heard(self, status: object) -> None:
        if self._bound is None and status is not OFF:
            return  # the released shortcut's own "off": quick ask is off, or Kestrel quits
        if isinstance(status, ShortcutStatus):
            self.status = status
            self.statusChanged.emit(status)
