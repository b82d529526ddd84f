"""A Kestrel window's state as the engine's pace sees it (the main window's and the quick-ask window's)."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.service.models.background import WindowState


def window_state(visible: bool, minimized: bool, app_state: Qt.ApplicationState) -> WindowState:
    """The window as the engine's policy sees it. Qt says Hidden or Suspended for an app
    the OS put away (the session locked, on platforms that tell)."""
    if not visible or minimized or app_state in (Qt.ApplicationState.ApplicationHidden,
                                                 Qt.ApplicationState.ApplicationSuspended):
        return WindowState.HIDDEN
    if app_state == Qt.ApplicationState.ApplicationActive:
        return WindowState.FOREGROUND
    return WindowState.BACKGROUND
