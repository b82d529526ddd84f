"""Export starts in the Documents folder and confirms with the path; clicking it opens the folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from PySide6.QtCore import QStandardPaths, QUrl
from PySide6.QtGui import QDesktopServices

from app.ui.chat.chat_files import ChatFiles
from app.ui.common.save_files import documents_folder
from tests.ui.conftest import run, until, with_generation


def test_the_documents_folder_is_where_export_starts_even_before_it_exists(qapp, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no user-dirs.dirs moving it
    monkeypatch.chdir(tmp_path)
    expected = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
    assert expected and Path(expected) != tmp_path
    assert documents_folder(make=False) == str(tmp_path / "home")  # not there yet, not made: home
    folder = documents_folder()
    assert folder == expected and Path(folder).is_dir()


@pytest.mark.slow
def test_an_export_is_confirmed_with_its_path_and_a_click_opens_its_folder(make_window, loop, qtbot, tmp_path,
                                                                          monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # its Documents folder is made on the first export
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    opened: list[QUrl] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", staticmethod(lambda url: opened.append(url) or True))
    window = make_window(model=None)
    with_generation(window, loop, max_tokens=8)  # a saved chat to export
    suggested: list[str] = []
    target = tmp_path / "out" / "chat.md"
    target.parent.mkdir()

    def ask_save(_parent, _caption, path: str, _filter) -> str:
        suggested.append(path)
        return str(target)

    files = ChatFiles(window.adapter, window.doors.chat, window.doors.files, window, ask_save=ask_save)
    files.on_exported = window.status.show_exported
    files.choose_export("markdown")
    run(loop, until(lambda: window.status.notice.isVisible(), what="the confirmation"))
    assert Path(suggested[0]).parent == tmp_path / "home" / "Documents"
    assert target.is_file()
    notice = window.status.notice
    assert notice.text().startswith("Exported to ") and notice.text().endswith("chat.md · Show in folder")
    assert str(target) in notice.toolTip()
    window.status.notice.click()
    assert opened == [QUrl.fromLocalFile(str(target.parent))]
    assert not window.status.notice.isVisible()


def test_the_window_s_own_export_confirms_through_the_status_line(make_window) -> None:
    window = make_window(model=None, start=False)
    assert window.chat_files.on_exported == window.status.show_exported
