"""File → Export this chat: the Save dialog asks before a file is replaced, the file it asked
about is the one written, and a replaced file keeps its permissions; a system message from
an older import is labelled as what it is."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QFileDialog, QMessageBox

from app.core.conversation import Message, MessageState, Role
from app.ui.chat.chat_files import ChatFiles
from app.ui.common.save_files import save_dialog
from app.ui.state.message_model import MessageListModel
from tests.ui.conftest import run, until, with_generation


def _answer_replace(reply: QMessageBox.StandardButton, asked: list[str]) -> None:
    """Answer the dialog's "already exists" question when it comes (it runs its own loop)."""
    def answer() -> None:
        box = QApplication.activeModalWidget()
        if isinstance(box, QMessageBox):
            asked.append(box.text())
            box.button(reply).click()
        else:
            QTimer.singleShot(20, answer)

    QTimer.singleShot(20, answer)


@pytest.mark.parametrize("reply", [QMessageBox.StandardButton.No, QMessageBox.StandardButton.Yes])
def test_a_name_typed_without_its_suffix_is_asked_about_with_it(qtbot, tmp_path: Path, reply) -> None:
    (tmp_path / "chat.md").write_text("my notes")
    dialog = save_dialog(None, "Export this chat", str(tmp_path / "Trip.md"), "Markdown (*.md)")
    dialog.setOption(QFileDialog.Option.DontUseNativeDialog)  # offscreen there is no OS dialog
    qtbot.addWidget(dialog)
    assert not dialog.testOption(QFileDialog.Option.DontConfirmOverwrite)
    dialog.show()
    dialog.selectFile("chat")  # what the user typed
    asked: list[str] = []
    _answer_replace(reply, asked)
    dialog.accept()
    assert asked and "chat.md already exists" in asked[0]
    if reply == QMessageBox.StandardButton.Yes:
        assert dialog.result() == QFileDialog.DialogCode.Accepted
        assert Path(dialog.selectedFiles()[0]) == tmp_path / "chat.md"
    else:
        assert dialog.isVisible() and dialog.result() != QFileDialog.DialogCode.Accepted


@pytest.mark.slow
def test_the_file_the_user_agreed_to_replace_is_written_and_keeps_its_mode(make_window, loop, tmp_path) -> None:
    window = make_window(model=None)
    with_generation(window, loop, max_tokens=8)  # a saved chat, no answer needed
    target = tmp_path / "chat.md"
    target.write_text("old")
    target.chmod(0o640)
    files = ChatFiles(window.adapter, window.doors.chat, window.doors.files, window,
                      ask_save=lambda *_: str(target))
    files.choose_export("markdown")
    run(loop, until(lambda: target.read_text(encoding="utf-8").startswith("# "), what="the export"))
    if os.name != "nt":
        assert stat.S_IMODE(target.stat().st_mode) == 0o640


@pytest.mark.slow
def test_a_suffix_added_after_the_dialog_never_replaces_a_file_nobody_was_asked_about(make_window, loop,
                                                                                      tmp_path) -> None:
    window = make_window(model=None)
    with_generation(window, loop, max_tokens=8)
    (tmp_path / "chat.md").write_text("my notes")
    files = ChatFiles(window.adapter, window.doors.chat, window.doors.files, window,
                      ask_save=lambda *_: str(tmp_path / "chat"))
    files.choose_export("markdown")
    run(loop, until(lambda: window.banner_row.isVisible(), what="the message"))
    assert "chat.md already exists" in window.banner.text()
    assert (tmp_path / "chat.md").read_text() == "my notes"
    assert not (tmp_path / "chat").exists()


def test_a_system_message_in_an_older_import_is_labelled_a_system_prompt(qapp) -> None:
    model = MessageListModel()
    model.reset_to([Message(1, 1, Role.SYSTEM, "You are a tea expert.", 0.0, MessageState.COMPLETE, None),
                    Message(2, 1, Role.USER, "Green?", 0.0, MessageState.COMPLETE, None),
                    Message(3, 1, Role.ASSISTANT, "Yes.", 0.0, MessageState.COMPLETE, None)])
    said = [model.index(row).data(Qt.ItemDataRole.AccessibleTextRole) for row in range(3)]
    assert said == ["System prompt: You are a tea expert.", "You: Green?", "Kestrel: Yes."]
