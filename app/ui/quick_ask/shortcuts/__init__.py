"""The global shortcut that opens quick ask: Windows RegisterHotKey, an X11 key grab, the Wayland portal."""

from __future__ import annotations

import os
import sys

from PySide6.QtCore import QObject

from app.ui.quick_ask.shortcuts.shortcut import GlobalShortcut, NoGlobalShortcut, ShortcutStatus

__all__ = ["GlobalShortcut", "NoGlobalShortcut", "ShortcutStatus", "global_shortcut"]


def global_shortcut(parent: QObject | None = None) -> GlobalShortcut:
    """The way this desktop offers a global shortcut, chosen without waiting on anything.

    On Wayland the portal is asked, never an X11 grab through XWayland: such a grab sees keys only
    while an X11 window has the focus, so it would claim to hold a shortcut that most programs never
    pass on. Where the portal lacks GlobalShortcuts, the portal shortcut's status says so in words.
    """
    if sys.platform == "win32":
        from app.ui.quick_ask.shortcuts.windows_hotkey import WindowsHotKey

        return WindowsHotKey(parent)
    if os.environ.get("WAYLAND_DISPLAY"):
        from app.ui.quick_ask.shortcuts.portal import PortalShortcut

        return PortalShortcut(parent)
    if os.environ.get("DISPLAY"):
        from app.ui.quick_ask.shortcuts.x11_grab import X11KeyGrab

        return X11KeyGrab(parent)
    return NoGlobalShortcut(parent)
