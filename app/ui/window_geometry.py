"""The main window's size, place and splitter, remembered across a restart in config/window-state.json.

Not in settings.json: that file holds what a person chose and is saved through the service (a
SettingsChanged each time, a version, a backup of a damaged file); a window dragged about would
churn it. This file is the window's own, written once, when the window closes or goes to the tray,
and read once before it shows (a few hundred bytes). A damaged or foreign file is ignored.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

from PySide6.QtCore import QByteArray, QRect
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QMainWindow, QSplitter

from app.core.paths import DataPaths

STATE_FILE = "window-state.json"
VERSION = 1
_MAX_BYTES = 64 * 1024


def state_file(paths: DataPaths) -> Path:
    return paths.config / STATE_FILE


def save_window_state(window: QMainWindow, splitter: QSplitter, path: Path) -> None:
    """Write the window's geometry and splitter (atomically: a crash mid-write keeps the old file)."""
    data = {"version": VERSION,
            "geometry": base64.b64encode(bytes(window.saveGeometry().data())).decode("ascii"),
            "splitter": base64.b64encode(bytes(splitter.saveState().data())).decode("ascii")}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(json.dumps(data), encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        pass  # a full or read-only disk: the next start uses the default size, nothing else is lost


def restore_window_state(window: QMainWindow, splitter: QSplitter, path: Path) -> bool:
    """Put the window and splitter back as saved; never off every screen there is now. False: nothing saved."""
    try:
        if path.stat().st_size > _MAX_BYTES:
            return False
        data = json.loads(path.read_text(encoding="utf-8"))
        geometry = base64.b64decode(data["geometry"], validate=True)
        split = base64.b64decode(data["splitter"], validate=True)
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return False
    if not window.restoreGeometry(QByteArray(geometry)):
        return False
    splitter.restoreState(QByteArray(split))
    keep_on_a_screen(window)
    return True


def keep_on_a_screen(window: QMainWindow) -> None:
    """A window saved on a screen that is gone (a monitor unplugged) comes back centred on the primary one."""
    frame = window.frameGeometry()
    if any(_enough_of(frame, screen.availableGeometry()) for screen in QGuiApplication.screens()):
        return
    primary = QGuiApplication.primaryScreen()
    if primary is None:
        return
    room = primary.availableGeometry()
    width, height = min(window.width(), room.width()), min(window.height(), room.height())
    window.resize(width, height)
    window.move(room.center().x() - width // 2, room.center().y() - height // 2)


def _enough_of(frame: QRect, room: QRect) -> bool:
    """Enough of the title bar on this screen to grab it: 100 × 30 pixels of the frame's top."""
    shown = frame.intersected(room)
    return shown.width() >= min(100, frame.width()) and shown.top() <= frame.top() + 30 and shown.height() >= 30
