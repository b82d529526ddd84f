"""The Min-p field in a model's own settings and in a chat's: shown, edited and read back, with a plain tooltip."""

from __future__ import annotations

from PySide6.QtWidgets import QFormLayout, QLabel

from app.core.generation import GenerationSettings
from app.library.model_defaults import ModelDefaults
from app.ui.models.model_settings_form import ModelSettingsForm
from app.ui.settings.dialogs import ConversationSettingsDialog


def _caption(form: QFormLayout, field: object) -> str:
    label = form.labelForField(field)
    assert isinstance(label, QLabel)
    return label.text().replace("&", "")


def test_a_models_own_min_p_round_trips_through_its_form(qtbot) -> None:
    form = ModelSettingsForm()
    qtbot.addWidget(form)
    form.show_defaults(ModelDefaults(min_p=0.05, top_k=20), GenerationSettings(), "auto")
    assert form.min_p.value() == 0.05 and form.min_p.isEnabled() and not form.app_box("min_p").isChecked()
    assert form.value() == ModelDefaults(min_p=0.05, top_k=20)
    assert "0 is off" in form.min_p.toolTip() and "min_p" not in form.min_p.toolTip()

    form.app_box("min_p").setChecked(True)  # back to the app's: off, shown greyed
    assert not form.min_p.isEnabled() and form.min_p.text() == "off" and form.value().min_p is None
    form.app_box("min_p").setChecked(False)
    form.min_p.setValue(0.1)
    with qtbot.waitSignal(form.saveRequested) as saved:
        form.save_button.click()
    assert saved.args == [ModelDefaults(min_p=0.1, top_k=20)]

    form.show_defaults(ModelDefaults(), GenerationSettings(min_p=0.02), "auto")  # a model written before min_p
    assert form.app_box("min_p").isChecked() and form.min_p.value() == 0.02 and form.value().min_p is None


def test_a_chats_min_p_round_trips_through_its_settings_dialog(qtbot) -> None:
    dialog = ConversationSettingsDialog("", GenerationSettings(min_p=0.05, top_k=30))
    qtbot.addWidget(dialog)
    form = dialog.form
    layout = form.layout()
    assert isinstance(layout, QFormLayout) and _caption(layout, form.min_p) == "Min-p"
    assert form.min_p.value() == 0.05 and "0 is off" in form.min_p.toolTip()

    form.min_p.setValue(0.2)
    _, settings = dialog.values()
    assert settings == GenerationSettings(min_p=0.2, top_k=30)
    form.min_p.setValue(0.0)
    assert form.min_p.text() == "off" and dialog.values()[1].min_p == 0.0
