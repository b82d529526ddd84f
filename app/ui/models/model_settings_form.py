"""A model's own defaults as a form: each setting its own value or the app's, with Save and Reset."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QHBoxLayout, QLabel, QLineEdit,
                               QPlainTextEdit, QPushButton, QSpinBox, QVBoxLayout, QWidget)

from app.core.generation import GenerationSettings
from app.library.model_defaults import ModelDefaults
from app.ui.common.window_look import fit_shortcut_letters

# (value, the item's text, its tooltip): short texts, so that the box fits a narrow pane at 200%.
DEVICE_CHOICES = (("auto", "Automatic", "The best this machine has: an NPU or a GPU the model fits on, else the CPU"),
                  ("npu", "NPU", "The neural processing unit (ONNX models)"),
                  ("gpu", "GPU", "The graphics card"), ("cpu", "CPU", "The processor only"))


def device_combo(parent: QWidget) -> QComboBox:
    """A box of DEVICE_CHOICES, each item's full meaning in its tooltip, as wide as its longest item."""
    combo = QComboBox(parent)
    combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
    for value, text, tip in DEVICE_CHOICES:
        combo.addItem(text, value)
        combo.setItemData(combo.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
    combo.setToolTip("Where the model runs. Automatic: the best this machine has, an NPU or a GPU the model "
                     "fits on, else the CPU.")
    return combo


@dataclass
class _Setting:
    """One row: the editor, the box that hands it to the app's setting, and how to read and write it."""

    editor: QWidget
    inherit: QCheckBox
    read: Callable[[], Any]
    write: Callable[[Any], None]
    app_value: Any = None

    def show(self, own: Any, app_value: Any) -> None:
        self.app_value = app_value
        self.inherit.setChecked(own is None)
        self.write(app_value if own is None else own)
        self.editor.setEnabled(own is not None)

    def value(self) -> Any:
        return None if self.inherit.isChecked() else self.read()

    def inherit_changed(self, inherit: bool) -> None:
        self.editor.setEnabled(not inherit)
        if inherit:
            self.write(self.app_value)


class LayersSpinBox(QSpinBox):
    """GPU layers: a number, "all" (-1), or "Auto" (None: placement decides), shown as -2."""

    _AUTO, _ALL = -2, -1

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setRange(self._AUTO, 9999)
        self.setToolTip("Layers placed on the GPU: 0 for none, all, or Auto to let Kestrel decide from "
                        "the memory free.")

    def layers(self) -> int | None:
        return None if self.value() == self._AUTO else self.value()

    def set_layers(self, layers: int | None) -> None:
        self.setValue(self._AUTO if layers is None else layers)

    def textFromValue(self, value: int) -> str:  # Override QSpinBox.textFromValue.
        return {self._AUTO: "Auto", self._ALL: "all"}.get(value, str(value))

    def valueFromText(self, text: str) -> int:  # Override QSpinBox.valueFromText.
        words = {"auto": self._AUTO, "all": self._ALL}
        return words.get(text.strip().lower(), int(text) if text.strip().lstrip("-").isdigit() else self._AUTO)

    def validate(self, text: str, position: int) -> tuple[QValidator.State, str, int]:  # Override QSpinBox.validate.
        stripped = text.strip().lower()
        if stripped.lstrip("-").isdigit() or stripped in ("auto", "all"):
            return QValidator.State.Acceptable, text, position
        if "auto".startswith(stripped) or "all".startswith(stripped) or stripped in ("", "-"):
            return QValidator.State.Intermediate, text, position
        return QValidator.State.Invalid, text, position


class ModelSettingsForm(QWidget):
    """A model's own context, GPU layers, device, system prompt, sampling and chat template.

    A ticked "the app's" box means the model has no value of its own (None in
    ModelDefaults): the app's setting shows, greyed. Signals: saveRequested(ModelDefaults),
    emitted with checked values; a value the model cannot take is said under the form.
    """

    saveRequested = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._saved = ModelDefaults()
        self._app = GenerationSettings()
        self._app_device = "auto"
        self._settings: dict[str, _Setting] = {}
        form = QFormLayout()
        self.context_length = self._spin(form, "context_length", "&Context length", 256, 1_048_576, step=256)
        self.gpu_layers = LayersSpinBox(self)
        self._add(form, "gpu_layers", "&GPU layers", self.gpu_layers, self.gpu_layers.layers,
                  self.gpu_layers.set_layers, "Auto")
        self.device = device_combo(self)
        self._add(form, "device_preference", "&Device", self.device, self._combo_read, self._combo_write)
        self.system_prompt = self._text(form, "system_prompt", "&System prompt", "the app's (none)")
        self.temperature = self._double(form, "temperature", "&Temperature", 0.0, 5.0, 0.05)
        self.top_p = self._double(form, "top_p", "Top &p", 0.01, 1.0, 0.01)
        self.top_k = self._spin(form, "top_k", "Top &k", 0, 1000)
        self.repeat_penalty = self._double(form, "repeat_penalty", "&Repeat penalty", 0.5, 3.0, 0.05)
        self.max_tokens = self._spin(form, "max_tokens", "&Max tokens", 1, 1_000_000)
        self.seed = self._spin(form, "seed", "S&eed", -1, 2**31 - 1)
        self.seed.setSpecialValueText("random")
        self.tools = QLineEdit(self)
        self.tools.setPlaceholderText("none")
        self.tools.setToolTip("The MCP servers (Settings → Tools) whose tools a new chat on this model offers, "
                              "separated by commas")
        self._add(form, "tools", "T&ools", self.tools, self._tools_read, self._tools_write)
        self.chat_template = self._text(form, "chat_template", "C&hat template", "the file's")
        self.chat_template.setPlaceholderText("A Jinja chat template to use instead of the one in the file")
        self.problem = QLabel(self)
        self.problem.setWordWrap(True)
        self.problem.setObjectName("settingsProblem")
        self.save_button = QPushButton("&Save", self)
        self.reset_button = QPushButton("R&eset", self)
        self.reset_button.setToolTip("Show the settings as they were last saved")
        self.save_button.clicked.connect(self._save)
        self.reset_button.clicked.connect(self.reset)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.reset_button)
        buttons.addWidget(self.save_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(form)
        layout.addWidget(self.problem)
        layout.addLayout(buttons)
        self.problem.hide()
        fit_shortcut_letters(self)

    # --- showing and reading ------------------------------------------------------------

    def show_defaults(self, defaults: ModelDefaults, app: GenerationSettings, app_device: str) -> None:
        """Show a model's saved defaults over the app's settings (shown where it has none)."""
        self._saved, self._app, self._app_device = defaults, app, app_device
        self.reset()

    def reset(self) -> None:
        """Back to what was last saved."""
        app_values = {name: getattr(self._app, name) for name in ("context_length", "temperature", "top_p",
                                                                   "top_k", "repeat_penalty", "max_tokens", "seed")}
        app_values.update(gpu_layers=None, device_preference=self._app_device, system_prompt="", chat_template="",
                          tools=self._app.tools)
        for name, setting in self._settings.items():
            setting.show(getattr(self._saved, name), app_values[name])
        self.problem.hide()

    def value(self) -> ModelDefaults:
        """The form's defaults, checked; ValueError names the setting it cannot take."""
        return ModelDefaults(**{name: setting.value() for name, setting in self._settings.items()}).validated()

    def app_box(self, name: str) -> QCheckBox:
        """The "the app's" box of a setting, by its ModelDefaults name."""
        return self._settings[name].inherit

    def _save(self) -> None:
        try:
            chosen = self.value()
        except ValueError as exc:
            self.problem.setText(f"Not saved: {exc}")
            self.problem.show()
            return
        self.problem.hide()
        self._saved = chosen
        self.saveRequested.emit(chosen)

    # --- building -------------------------------------------------------------------------

    def _add(self, form: QFormLayout, name: str, label: str, editor: QWidget, read: Callable[[], Any],
             write: Callable[[Any], None], inherit_text: str = "the app's") -> None:
        inherit = QCheckBox(inherit_text, self)
        inherit.setToolTip("Use the app's setting (File → Settings…) for this model")
        # Narrow enough for the manager's side pane: the widest values (a seed, the device's
        # long name) scroll inside their box rather than widen the form.
        editor.setMinimumWidth(90)
        setting = _Setting(editor, inherit, read, write)
        inherit.toggled.connect(setting.inherit_changed)
        self._settings[name] = setting
        row = QHBoxLayout()
        row.addWidget(editor, 1)
        row.addWidget(inherit)
        caption = QLabel(label, self)
        caption.setBuddy(editor)
        form.addRow(caption, row)

    def _spin(self, form: QFormLayout, name: str, label: str, low: int, high: int, *, step: int = 1,
              inherit_text: str = "the app's") -> QSpinBox:
        box = QSpinBox(self)
        box.setRange(low, high)
        box.setSingleStep(step)
        self._add(form, name, label, box, box.value, lambda value: box.setValue(int(value)), inherit_text)
        return box

    def _double(self, form: QFormLayout, name: str, label: str, low: float, high: float, step: float) -> QDoubleSpinBox:
        box = QDoubleSpinBox(self)
        box.setRange(low, high)
        box.setSingleStep(step)
        box.setDecimals(2)
        self._add(form, name, label, box, box.value, lambda value: box.setValue(float(value)))
        return box

    def _text(self, form: QFormLayout, name: str, label: str, inherit_text: str) -> QPlainTextEdit:
        edit = QPlainTextEdit(self)
        edit.setTabChangesFocus(True)
        edit.setMaximumHeight(edit.fontMetrics().lineSpacing() * 4 + 12)
        self._add(form, name, label, edit, edit.toPlainText, lambda value: edit.setPlainText(value or ""),
                  inherit_text)
        return edit

    def _tools_read(self) -> tuple[str, ...]:
        return tuple(name.strip() for name in self.tools.text().split(",") if name.strip())

    def _tools_write(self, value: tuple[str, ...] | None) -> None:
        self.tools.setText(", ".join(value or ()))

    def _combo_read(self) -> str:
        return str(self.device.currentData())

    def _combo_write(self, value: str) -> None:
        self.device.setCurrentIndex(max(0, self.device.findData(value)))
