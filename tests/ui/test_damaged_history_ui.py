"""The window over a damaged history: it says so, offers the choices, and the model still loads."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.core.paths import data_paths
from tests.core.damaged_history import CONVERSATIONS, damaged_history, digest
from tests.ui.conftest import idle, run, until


def test_a_damaged_history_is_shown_with_its_choices_and_recovery_fills_the_list(make_window, loop, qtbot,
                                                                                  capfd) -> None:
    path = damaged_history(data_paths().ensure().history_db, 2)
    before = digest(path)
    window = make_window()
    panel = window.history_panel
    assert panel.isVisible() and str(path) in panel.text.text() and "damaged" in panel.text.text()
    assert panel.recover_button.isVisible() and panel.fresh_button.isVisible()
    model = window.doors.model
    assert model.model_state.value == "ready" and window.model_label.text() == model.model_detail
    assert window.adapter.conversations.rowCount() == 0 and digest(path) == before
    # Chat goes on while the choice waits.
    qtbot.keyClicks(window.composer.edit, "Hello")
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)
    run(loop, until(lambda: idle(window)() and window.adapter.messages.rowCount() == 2, what="the answer"))

    qtbot.mouseClick(panel.recover_button, Qt.MouseButton.LeftButton)
    run(loop, until(lambda: "Recovered" in panel.text.text(), what="the recovery"))
    assert not panel.recover_button.isVisible() and panel.dismiss_button.isVisible()
    assert "kept, unchanged, as" in panel.text.text()
    assert window.adapter.conversations.rowCount() == CONVERSATIONS + 1
    assert [m.text for m in window.adapter.messages.messages()][0] == "Hello"  # still open
    qtbot.mouseClick(panel.dismiss_button, Qt.MouseButton.LeftButton)
    assert not panel.isVisible()
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err
