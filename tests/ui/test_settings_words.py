"""Settings in words a newcomer reads: no GPU offered by a build without a GPU backend, and the speed rows said plainly."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QComboBox, QLabel

from app.core.settings import Settings
from app.ui.models.model_settings_form import device_combo
from app.ui.settings.dialogs import SettingsDialog, no_gpu_backend
from tests.ui.conftest import run, until


def _gpu(box: QComboBox) -> tuple[str, bool]:
    items = box.model()
    assert isinstance(items, QStandardItemModel)
    item = items.item(box.findData("gpu"))
    return item.text(), item.isEnabled()


def test_a_build_without_a_gpu_backend_greys_the_gpu_choice_and_says_why(qtbot) -> None:
    box = device_combo(None)
    qtbot.addWidget(box)
    no_gpu_backend(box)
    assert _gpu(box) == ("GPU (not in this build)", False)
    assert "no GPU backend" in box.toolTip()
    chosen = device_combo(None)  # a GPU chosen before (in the settings file) stays shown as chosen
    qtbot.addWidget(chosen)
    chosen.setCurrentIndex(chosen.findData("gpu"))
    no_gpu_backend(chosen)
    assert _gpu(chosen) == ("GPU (not in this build)", True) and chosen.currentData() == "gpu"


def test_the_windows_settings_ask_the_engine_whether_this_build_has_a_gpu_backend(make_window, loop,
                                                                                  monkeypatch) -> None:
    import llama_cpp

    if llama_cpp.llama_supports_gpu_offload():
        pytest.skip("this llama-cpp-python was built with a GPU backend")
    window = make_window()
    seen: dict[str, tuple[str, bool]] = {}

    def look(dialog: SettingsDialog) -> int:
        run(loop, until(lambda: _gpu(dialog.device)[0] != "GPU", what="the engine's report"))
        seen["gpu"] = _gpu(dialog.device)
        return 0

    monkeypatch.setattr(SettingsDialog, "exec", look)
    window.edit_settings()
    assert seen["gpu"] == ("GPU (not in this build)", False)


def test_the_speed_rows_are_said_in_plain_words_with_the_terms_in_their_tooltips(qtbot) -> None:
    dialog = SettingsDialog(Settings(), None)
    qtbot.addWidget(dialog)
    shown = " ".join(label.text() for label in dialog.findChildren(QLabel))
    for jargon in ("Saved chat st", "Draft from the prompt", "lookup", "on while it pays"):
        assert jargon not in shown
    assert "Quick reopen of recent ch&ats" in shown and "Faster answers that cop&y from the chat" in shown
    assert dialog.prompt_lookup.currentText() == "Automatic (when it helps)"
    assert "Prompt lookup decoding" in dialog.prompt_lookup.toolTip()
    assert "saved chat states" in dialog.saved_states.toolTip() and "never removed" in dialog.saved_states.toolTip()
    assert dialog.clear_states.text() == "Free this space no&w" and "the chats stay" in dialog.clear_states.toolTip()
