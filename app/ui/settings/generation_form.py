"""The generation settings as a form: sampling, length, context, thinking (with why when the model cannot) and tools."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QCheckBox, QDoubleSpinBox, QFormLayout, QLabel, QSpinBox, QWidget

from app.core.generation import GenerationSettings
from app.ui.common.window_look import fit_shortcut_letters
from app.ui.models.model_settings_form import min_p_box
from app.ui.settings.mcp_json_dialog import ServerChecklist


class GenerationForm(QWidget):
    """The generation settings as spin boxes, with the ranges GenerationSettings accepts.

    can_switch_thinking: False when the model in use cannot turn its thinking on and off
    (the box is shown, disabled, with why). servers: the MCP servers in mcp.json, for
    the "Tools this chat may use" checklist.
    """

    def __init__(self, settings: GenerationSettings, parent: QWidget | None = None, *,
                 can_switch_thinking: bool = True, always_thinks: bool = False, servers: Sequence[str] = (),
                 thinking_note: str = "") -> None:
        super().__init__(parent)
        self._settings = settings
        form = QFormLayout(self)
        self.temperature = double_box(0.0, 5.0, 0.05, settings.temperature)
        self.top_p = double_box(0.01, 1.0, 0.01, settings.top_p)
        self.top_k = int_box(0, 1000, settings.top_k)
        self.min_p = min_p_box(double_box(0.0, 1.0, 0.01, settings.min_p))
        self.repeat_penalty = double_box(0.5, 3.0, 0.05, settings.repeat_penalty)
        self.max_tokens = int_box(1, 1_000_000, settings.max_tokens)
        self.seed = int_box(-1, 2**31 - 1, settings.seed)
        self.seed.setSpecialValueText("random")
        self.context_length = int_box(256, 1_048_576, settings.context_length)
        self.context_length.setSingleStep(256)
        form.addRow("&Temperature", self.temperature)
        form.addRow("Top &p", self.top_p)
        form.addRow("Top &k", self.top_k)
        form.addRow("M&in-p", self.min_p)
        form.addRow("&Repeat penalty", self.repeat_penalty)
        form.addRow("&Max tokens", self.max_tokens)
        form.addRow("S&eed", self.seed)
        form.addRow("&Context length", self.context_length)
        self.thinking = QCheckBox("Think &before answering", self)
        # A model without the switch shows what it does, not the setting it cannot follow.
        self.thinking.setChecked(settings.thinking if can_switch_thinking else always_thinks)
        self.thinking.setEnabled(can_switch_thinking)
        self.thinking.setToolTip("For models that can work a question through before they answer, such as "
                                 "Qwen3 (its chat template has an enable_thinking switch).")
        form.addRow("", self.thinking)
        words = thinking_note or ("" if can_switch_thinking else
                                  "The model in use always thinks first: it has no switch to turn that off."
                                  if always_thinks else "The model in use cannot think before answering.")
        self.thinking_note = QLabel(words, self)
        self.thinking_note.setObjectName("thinkingNote")
        self.thinking_note.setWordWrap(True)
        self.thinking_note.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.thinking_note.setVisible(bool(words))
        form.addRow("", self.thinking_note)
        self._switchable = can_switch_thinking
        self.tools = ServerChecklist(servers, settings.tools, self)
        tools_label = QLabel("T&ools this chat may use" if self.tools.count() else
                             "Tools: none yet (add MCP servers in Settings → Tools)", self)
        tools_label.setWordWrap(True)
        tools_label.setBuddy(self.tools)
        form.addRow(tools_label, self.tools)
        fit_shortcut_letters(self)

    def value(self) -> GenerationSettings:
        return dataclasses.replace(
            self._settings, temperature=self.temperature.value(), top_p=self.top_p.value(),
            top_k=self.top_k.value(), min_p=self.min_p.value(), repeat_penalty=self.repeat_penalty.value(),
            max_tokens=self.max_tokens.value(), seed=self.seed.value(),
            context_length=self.context_length.value(),
            # Kept as it was when the model in use has no switch: the next model may have one.
            thinking=self.thinking.isChecked() if self._switchable else self._settings.thinking,
            tools=self.tools.chosen()).validated()


def double_box(low: float, high: float, step: float, value: float) -> QDoubleSpinBox:
    box = QDoubleSpinBox()
    box.setRange(low, high)
    box.setSingleStep(step)
    box.setDecimals(2)
    box.setValue(value)
    return box


def int_box(low: int, high: int, value: int) -> QSpinBox:
    box = QSpinBox()
    box.setRange(low, high)
    box.setValue(value)
    return box
