"""The main window's size, place and splitter come back after a restart, never off every screen."""

from __future__ import annotations

import json

from PySide6.QtGui import QGuiApplication

from app.core.paths import data_paths
from app.ui.window_geometry import state_file


def test_size_place_and_splitter_come_back_after_a_restart(make_window, qtbot) -> None:
    first = make_window(model=None, start=False)
    qtbot.waitExposed(first)
    first.resize(700, 520)
    first.move(40, 30)
    first.splitter.setSizes([200, 500])
    sizes, size, place = first.splitter.sizes(), first.size(), first.pos()
    first.quit()
    assert state_file(data_paths()).is_file()
    again = make_window(model=None, start=False)
    qtbot.waitExposed(again)
    assert again.size() == size and again.pos() == place
    assert again.splitter.sizes() == sizes
    settings = data_paths().settings_file
    assert not settings.exists() or "geometry" not in settings.read_text(encoding="utf-8")


def test_a_place_off_every_screen_comes_back_onto_one(make_window, qtbot) -> None:
    first = make_window(model=None, start=False)
    qtbot.waitExposed(first)
    first.resize(600, 400)
    first.move(30000, 30000)  # a monitor that is gone now
    first.quit()
    again = make_window(model=None, start=False)
    qtbot.waitExposed(again)
    room = QGuiApplication.primaryScreen().availableGeometry()
    assert room.intersects(again.frameGeometry()) and room.contains(again.frameGeometry().topLeft())


def test_a_damaged_state_file_is_ignored(make_window, qtbot) -> None:
    path = state_file(data_paths().ensure())
    path.write_text(json.dumps({"version": 1, "geometry": "not base64!", "splitter": 3}), encoding="utf-8")
    window = make_window(model=None, start=False)
    qtbot.waitExposed(window)
    assert window.splitter.sizes()[0] > 0 and window.isVisible()


def test_a_window_placed_off_every_screen_is_brought_onto_the_primary_one(qtbot) -> None:
    """Qt's restoreGeometry already pulls a saved place onto a screen; this guard covers what it leaves
    (a window moved before it is shown, a platform that keeps the place as given)."""
    from PySide6.QtWidgets import QMainWindow

    from app.ui.window_geometry import keep_on_a_screen

    window = QMainWindow()
    qtbot.addWidget(window)
    window.resize(600, 400)
    window.move(30000, 30000)
    keep_on_a_screen(window)
    room = QGuiApplication.primaryScreen().availableGeometry()
    assert room.contains(window.frameGeometry().topLeft())
    window.move(room.topLeft())
    keep_on_a_screen(window)
    assert window.pos() == room.topLeft()  # on a screen already: left where it is
