"""A model's own defaults as a form: each setting its own value or as in Settings, with Save and Reset."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QStandardItemModel, QValidator
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QHBoxLayout, QLabel, QLineEdit,
                               QPlainTextEdit, QPushButton, QSpinBox, QVBoxLayout, QWidget)

from app.core.generation import GenerationSettings
from app.library.model_defaults import ModelDefaults
from app.ui.common.window_look import fit_shortcut_letters

if TYPE_CHECKING:
    from app.service.doors.models import ModelDoor

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


def no_gpu_backend(device: QComboBox) -> None:
    """Say in the Device box that this build cannot use a GPU: its GPU item is greyed and says why."""
    index = device.findData("gpu")
    items = device.model()
    if index < 0 or not isinstance(items, QStandardItemModel):
        return
    item = items.item(index)
    item.setText("GPU (not in this build)")
    item.setToolTip("This build of Kestrel has no GPU backend: models run on the processor (CPU).")
    item.setEnabled(device.currentIndex() == index)  # a choice made before stays visible, not silently changed
    device.setToolTip(device.toolTip() + " This build has no GPU backend: models run on the CPU.")


# What min-p does, in the words of both forms that set it (a model's own here, a chat's in Settings).
MIN_P_TIP = ("Leaves out words far less likely than the likeliest one: 0.05 drops those under 5% of its "
             "chance. 0 is off. ONNX models cannot use it.")


def min_p_box(box: QDoubleSpinBox) -> QDoubleSpinBox:
    """A min-p box: 0 reads "off", with MIN_P_TIP."""
    box.setSpecialValueText("off")
    box.setToolTip(MIN_P_TIP)
    return box


async def lacks_gpu_backend(model: "ModelDoor") -> bool:
    """Whether the engine's hardware report says this llama.cpp build cannot offload to a GPU
    (False when the engine cannot be asked: the boxes stay as they are, the hardware window says why)."""
    try:
        report = (await model.hardware_overview()).report
    except Exception:  # noqa: BLE001 - not known is not "no GPU backend"
        return False
    return report.llama is not None and not report.llama.gpu_offload


@dataclass
class _Setting:
    """One row: the editor, the box that hands it to the setting in Settings, and how to read and write
    it. usable: False where this build cannot follow the setting (its row greyed, its value kept)."""

    editor: QWidget
    inherit: QCheckBox
    read: Callable[[], Any]
    write: Callable[[Any], None]
    app_value: Any = None
    usable: bool = True

    def show(self, own: Any, app_value: Any) -> None:
        self.app_value = app_value
        self.inherit.setChecked(own is None)
        self.write(app_value if own is None else own)
        self.editor.setEnabled(own is not None and self.usable)

    def value(self) -> Any:
        return None if self.inherit.isChecked() else self.read()

    def inherit_changed(self, inherit: bool) -> None:
        self.editor.setEnabled(not inherit and self.usable)
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

    A ticked "as in Settings" box means the model has no value of its own (None in
    ModelDefaults): the value in File → Settings… shows, greyed. In a build with no GPU
    backend (`no_gpu_backend`) the GPU layers row is greyed and says so. Signals:
    saveRequested(ModelDefaults), emitted with checked values; a value the model cannot take
    is said under the form.
    """

    saveRequested = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._saved = ModelDefaults()
        self._app = GenerationSettings()
        self._app_device = "auto"
        self._settings: dict[str, _Setting] = {}
        self._rows: dict[str, QHBoxLayout] = {}
        form = QFormLayout()
        self.context_length = self._spin(form, "context_length", "&Context length", 256, 1_048_576, step=256)
        self.gpu_layers = LayersSpinBox(self)
        self.gpu_layers_caption = self._add(form, "gpu_layers", "&GPU layers", self.gpu_layers,
                                            self.gpu_layers.layers, self.gpu_layers.set_layers, "Auto")
        # Shown instead of the box and its Auto in a build that cannot offload (no_gpu_backend).
        self.no_gpu_note = QLabel("none: this build has no GPU backend", self)
        self.no_gpu_note.setObjectName("noGpuBackend")
        self.no_gpu_note.setWordWrap(True)
        self.no_gpu_note.setEnabled(False)
        self.no_gpu_note.hide()
        self._rows["gpu_layers"].addWidget(self.no_gpu_note, 1)
        self.app_box("gpu_layers").setToolTip("Ticked: Kestrel places as many layers on the GPU as its free "
                                              "memory holds. Untick to give this model its own number.")
        self.device = device_combo(self)
        self._add(form, "device_preference", "&Device", self.device, self._combo_read, self._combo_write)
        self.system_prompt = self._text(form, "system_prompt", "&System prompt", "as in Settings (none)")
        self.temperature = self._double(form, "temperature", "&Temperature", 0.0, 5.0, 0.05)
        self.top_p = self._double(form, "top_p", "Top &p", 0.01, 1.0, 0.01)
        self.top_k = self._spin(form, "top_k", "Top &k", 0, 1000)
        self.min_p = self._double(form, "min_p", "M&in-p", 0.0, 1.0, 0.01)
        min_p_box(self.min_p)
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
        self.app_box("chat_template").setToolTip("Ticked: this model uses the chat template in its file. Untick "
                                                 "to give it one of its own.")
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
        """Show a model's saved defaults over the values in Settings (shown where it has none)."""
        self._saved, self._app, self._app_device = defaults, app, app_device
        self.reset()

    def reset(self) -> None:
        """Back to what was last saved."""
        app_values = {name: getattr(self._app, name) for name in ("context_length", "temperature", "top_p", "top_k",
                                                                   "min_p", "repeat_penalty", "max_tokens", "seed")}
        app_values.update(gpu_layers=None, device_preference=self._app_device, system_prompt="", chat_template="",
                          tools=self._app.tools)
        for name, setting in self._settings.items():
            setting.show(getattr(self._saved, name), app_values[name])
        self.problem.hide()

    def value(self) -> ModelDefaults:
        """The form's defaults, checked; ValueError names the setting it cannot take."""
        return ModelDefaults(**{name: setting.value() for name, setting in self._settings.items()}).validated()

    def app_box(self, name: str) -> QCheckBox:
        """The "as in Settings" box of a setting, by its ModelDefaults name."""
        return self._settings[name].inherit

    def no_gpu_backend(self) -> None:
        """This build cannot offload to a GPU: GPU layers greyed with why (a value saved before is kept,
        not silently changed), and the Device box's GPU greyed as in Settings."""
        layers = self._settings["gpu_layers"]
        layers.usable = False
        layers.editor.setEnabled(False)
        layers.editor.hide()
        layers.inherit.setEnabled(False)
        layers.inherit.hide()
        self.gpu_layers_caption.setEnabled(False)
        self.gpu_layers_caption.setText("GPU layers")  # its shortcut letter has nothing to go to now
        self.no_gpu_note.show()
        no_gpu_backend(self.device)

    async def follow_gpu_backend(self, model: "ModelDoor") -> None:
        """Ask the engine (off the UI thread) whether this build has a GPU backend; grey what it cannot use."""
        if await lacks_gpu_backend(model):
            try:
                self.no_gpu_backend()
            except RuntimeError:
                pass  # the window was closed meanwhile

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
             write: Callable[[Any], None], inherit_text: str = "as in Settings") -> QLabel:
        inherit = QCheckBox(inherit_text, self)
        inherit.setToolTip("Ticked: this model uses the value in File → Settings…. Untick to give this model its own.")
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
        self._rows[name] = row
        return caption

    def _spin(self, form: QFormLayout, name: str, label: str, low: int, high: int, *, step: int = 1,
              inherit_text: str = "as in Settings") -> QSpinBox:
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
