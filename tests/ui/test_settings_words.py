"""Settings in words a newcomer reads: no GPU offered by a build without a GPU backend, the speed rows said
plainly, a comfortable reading speed to set, and a model's own settings "as in Settings" (issue 37)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QCheckBox, QComboBox, QLabel

from app.core.generation import GenerationSettings
from app.core.settings import Settings
from app.library.model_defaults import ModelDefaults
from app.ui.models.model_manager import ModelManager
from app.ui.models.model_settings_form import ModelSettingsForm
from app.ui.models.model_settings_form import device_combo, no_gpu_backend
from app.ui.settings.dialogs import SettingsDialog
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



def test_a_comfortable_reading_speed_is_a_setting_and_the_run_well_filter_points_to_it(qtbot) -> None:
    from tests.ui.test_model_manager import manager

    dialog = SettingsDialog(Settings(), None)
    qtbot.addWidget(dialog)
    labels = {label.text(): label for label in dialog.findChildren(QLabel)}
    assert labels["A comfortable readin&g speed"].buddy() is dialog.comfortable_speed
    assert dialog.comfortable_speed.text() == "10.0 tokens/s"
    assert "runs well at this speed or faster" in dialog.comfortable_speed.toolTip()
    window, _adapter = manager(qtbot)
    tip = window.catalog.runs_well_only.toolTip()
    assert "settings.json" not in tip and "comfortable_tokens_per_s" not in tip
    assert "“A comfortable reading speed” in File → Settings…" in tip


def _form(qtbot, defaults: ModelDefaults = ModelDefaults()) -> ModelSettingsForm:
    form = ModelSettingsForm()
    qtbot.addWidget(form)
    form.show_defaults(defaults, GenerationSettings(), "auto")
    return form


def test_a_models_own_settings_say_as_in_settings_not_the_apps(qtbot) -> None:
    form = _form(qtbot)
    boxes = {box.text() for box in form.findChildren(QCheckBox)}
    assert boxes == {"as in Settings", "as in Settings (none)", "Auto", "the file's"}
    assert not [box for box in form.findChildren(QCheckBox) if "app" in box.text() + box.toolTip()]
    assert form.app_box("temperature").toolTip() == ("Ticked: this model uses the value in File → Settings…. "
                                                     "Untick to give this model its own.")
    assert "chat template in its file" in form.app_box("chat_template").toolTip()
    assert "free memory" in form.app_box("gpu_layers").toolTip()


def test_a_build_without_a_gpu_backend_greys_gpu_layers_and_says_why_keeping_a_saved_value(qtbot) -> None:
    form = _form(qtbot, ModelDefaults(gpu_layers=20))
    assert not form.no_gpu_note.isVisibleTo(form) and form.gpu_layers.isEnabled()
    form.no_gpu_backend()
    assert form.no_gpu_note.isVisibleTo(form) and form.no_gpu_note.text() == "none: this build has no GPU backend"
    assert not form.gpu_layers.isVisibleTo(form) and not form.app_box("gpu_layers").isVisibleTo(form)
    assert not form.gpu_layers_caption.isEnabled() and _gpu(form.device) == ("GPU (not in this build)", False)
    form.reset()  # showing the model again does not bring the box back
    assert not form.gpu_layers.isEnabled() and not form.app_box("gpu_layers").isEnabled()
    assert form.value().gpu_layers == 20, "a value saved before stays, not silently changed"


@pytest.mark.parametrize(("offload", "greyed"), [(False, True), (True, False), (None, False)])
def test_the_form_asks_the_engines_report_whether_to_grey_gpu_layers(qtbot, loop, offload, greyed) -> None:
    """A stand-in ModelDoor (its hardware_overview as the real one's shape: .report.llama.gpu_offload;
    None: the engine cannot be asked, which greys nothing)."""

    class Door:
        async def hardware_overview(self):
            if offload is None:
                raise RuntimeError("no engine here")
            return SimpleNamespace(report=SimpleNamespace(llama=SimpleNamespace(gpu_offload=offload)))

    form = _form(qtbot)
    run(loop, form.follow_gpu_backend(Door()))  # type: ignore[arg-type]
    assert form.no_gpu_note.isVisibleTo(form) is greyed and form.gpu_layers.isVisibleTo(form) is not greyed


def test_the_model_managers_settings_ask_the_engine_whether_this_build_has_a_gpu_backend(make_window, loop) -> None:
    import llama_cpp

    if llama_cpp.llama_supports_gpu_offload():
        pytest.skip("this llama-cpp-python was built with a GPU backend")
    window = make_window()
    doors = window.doors
    shown = ModelManager(window.adapter, doors.library, doors.settings, window, model=doors.model)
    form = shown.installed.form
    run(loop, until(lambda: form.no_gpu_note.isVisibleTo(form), what="the engine's report"))
    assert not form.gpu_layers.isVisibleTo(form) and _gpu(form.device) == ("GPU (not in this build)", False)
    shown.close()
