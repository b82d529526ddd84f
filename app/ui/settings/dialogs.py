"""Dialogs: a conversation's settings, the app's settings, editing a message."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDialog, QDialogButtonBox, QDoubleSpinBox, QFormLayout, QFrame,
                               QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QScrollArea, QTabWidget,
                               QVBoxLayout, QWidget)

from app.core.generation import GenerationSettings
from app.core.settings import Settings
from app.core.units import human_size
from app.tools.choices import ToolChoices
from app.ui.settings.mcp_json_dialog import edit_mcp_json
from app.ui.settings.memory_settings_page import MemorySettingsPage
from app.ui.models.model_settings_form import device_combo, lacks_gpu_backend, no_gpu_backend
from app.ui.settings.generation_form import GenerationForm, double_box, int_box
from app.ui.settings.quick_ask_settings_page import QuickAskSettingsPage, ready_cost_words
from app.ui.settings.server_settings_page import ServerSettingsPage
from app.ui.settings.tools_settings_page import ToolsSettingsPage
from app.ui.settings.voice_settings_page import Microphones, VoiceSettingsPage
from app.ui.common.window_look import fit_shortcut_letters

if TYPE_CHECKING:
    from app.service.doors.models import ModelDoor
    from app.service.doors.settings import ToolsDoor
    from app.ui.state.adapter import ServiceAdapter


# Said on the idle-unload controls while quick ask keeps the model loaded.
KEPT_READY_WORDS = ("Quick ask keeps the model loaded so that it answers at once, so it is not unloaded when "
                    "idle. To unload it, untick \"Keep the model loaded\" on the Quick ask page.")

NO_MEMORY_TIP = ("This chat's answers are not given your memories (View → Memory… lists them). Your other "
                 "chats still use them.")
MEMORY_OFF_TIP = "Memory is off for every chat now: View → Memory… or Settings' Memory page turns it on."


class ConversationSettingsDialog(QDialog):
    """A conversation's system prompt and generation settings, and whether it uses the person's memories
    (`no_memory`, ticked: it does not; `uses_memory()`). memory_on: memory is on in the settings (off, the
    box is kept but says that no chat uses memory now)."""

    def __init__(self, system_prompt: str, settings: GenerationSettings, parent: QWidget | None = None, *,
                 can_switch_thinking: bool = True, always_thinks: bool = False, servers: Sequence[str] = (),
                 uses_memory: bool = True, memory_on: bool = True) -> None:
        super().__init__(parent)
        self.setWindowTitle("Chat settings")
        self.system_prompt = QPlainTextEdit(system_prompt, self)
        self.system_prompt.setPlaceholderText("For example: You are a concise assistant.")
        self.system_prompt.setTabChangesFocus(True)
        self.form = GenerationForm(settings, self, can_switch_thinking=can_switch_thinking,
                                   always_thinks=always_thinks, servers=servers)
        label = QLabel("&System prompt (always kept in the model's view)", self)
        label.setBuddy(self.system_prompt)
        self.no_memory = QCheckBox("Don't use my &memories in this chat", self)
        self.no_memory.setObjectName("noMemory")
        self.no_memory.setChecked(not uses_memory)
        self.no_memory.setToolTip(NO_MEMORY_TIP if memory_on else f"{NO_MEMORY_TIP} {MEMORY_OFF_TIP}")
        layout = QVBoxLayout(self)
        layout.addWidget(label)
        layout.addWidget(self.system_prompt)
        layout.addWidget(self.no_memory)
        layout.addWidget(self.form)
        layout.addWidget(_buttons(self))

    def values(self) -> tuple[str, GenerationSettings]:
        return self.system_prompt.toPlainText(), self.form.value()

    def uses_memory(self) -> bool:
        return not self.no_memory.isChecked()


class SettingsDialog(QDialog):
    """The app's settings: defaults for new chats, threads, theme, saved chat states; the API server.

    Six tabs: `general`, `quick_ask` (a QuickAskSettingsPage), `server` (a ServerSettingsPage),
    `tools` (a ToolsSettingsPage), `memory` (a MemorySettingsPage, whose Open Memory… calls
    `show_memory` after closing as OK does; hidden without it) and `voice` (a VoiceSettingsPage, which lists
    `microphones` when first shown). adapter: the window's ServiceAdapter (its spawn, and the
    models it lists, for what keeping one loaded costs), with model (the ModelDoor) for "Clear
    saved chat states" and the disk they take (both off the UI thread); without them the button
    is disabled, and "Start Kestrel when I sign in" only changes the setting. tools: the ToolsDoor, whose servers and choices the
    Tools page shows and saves (with the adapter); without it the page lists none. mcp_file:
    where "Edit mcp.json…" reads and writes.
    """

    def __init__(self, settings: Settings, parent: QWidget | None = None, *,
                 adapter: "ServiceAdapter | None" = None, model: "ModelDoor | None" = None,
                 tools: "ToolsDoor | None" = None, mcp_file: Path | None = None,
                 show_memory: Callable[[], None] | None = None, microphones: Microphones | None = None) -> None:
        super().__init__(parent)
        self._adapter = adapter
        self._model = model
        self._tools = tools
        self._mcp_file = mcp_file
        self.setWindowTitle("Settings")
        self._settings = settings
        servers = tools.servers() if tools is not None else []
        self.form = GenerationForm(settings.generation, self, servers=[server.name for server in servers],
                                   thinking_note=_thinking_default_note(model))
        self.theme = QComboBox(self)
        for value, text in (("system", "Follow the system"), ("light", "Light"), ("dark", "Dark")):
            self.theme.addItem(text, value)
        self.theme.setCurrentIndex(max(0, self.theme.findData(settings.theme)))
        self.device = device_combo(self)
        self.device.setCurrentIndex(max(0, self.device.findData(settings.device_preference)))
        if adapter is not None and model is not None:
            adapter.spawn(self._show_gpu_backend(model))  # the engine's report: off the UI thread
        self.threads = int_box(0, 256, settings.threads or 0)
        self.threads.setSpecialValueText("automatic")
        self.threads.setToolTip("How many CPU threads the model uses. Automatic: the cores other programs "
                                "leave free.")
        self.when_hidden = _choices(self, settings.when_hidden, (
            ("pause", "Pause the answer"), ("gently", "Keep going gently"), ("full", "Keep going at full speed")))
        self.when_in_background = _choices(self, settings.when_in_background, (
            ("full", "Keep going at full speed"), ("gently", "Keep going gently")))
        self.when_in_background.setToolTip("Gently: the model runs at a lower priority (in Efficiency mode on "
                                           "Windows), so the app you are using stays quick. On battery with "
                                           "battery saver on, full speed becomes gently.")
        minutes = settings.unload_after_minutes
        self.unload_after = int_box(0, 10_000, 0 if minutes is None else max(1, round(minutes)))
        self.unload_after.setSpecialValueText("never")
        self.unload_after.setSuffix(" min")
        self.gentle_threads = QCheckBox("Use half the CPU threads when running gently", self)
        self.gentle_threads.setChecked(settings.gentle_fewer_threads)
        self.exit_engine = QCheckBox("Also end the engine process when it is unloaded", self)
        self.exit_engine.setChecked(settings.exit_engine_when_idle)
        self.comfortable_speed = _comfortable_speed_box(settings.comfortable_tokens_per_s)
        self._comfortable_shown = self.comfortable_speed.value()
        extra = QFormLayout()
        extra.addRow("T&heme", self.theme)
        extra.addRow("&Device", self.device)
        extra.addRow("CPU thread&s", self.threads)
        extra.addRow("When the window is &minimized", self.when_hidden)
        extra.addRow("When another app has the &focus", self.when_in_background)
        extra.addRow("", self.gentle_threads)
        extra.addRow("&Unload the model when idle for", self.unload_after)
        extra.addRow("", self.exit_engine)
        extra.addRow("A comfortable readin&g speed", self.comfortable_speed)
        self._add_speed_rows(extra, settings)
        self.general = QWidget(self)
        general = QVBoxLayout(self.general)
        general.addWidget(QLabel("Defaults for new chats", self.general))
        general.addWidget(self.form)
        general.addLayout(extra)
        self.quick_ask = QuickAskSettingsPage(settings, self, spawn=adapter.spawn if adapter is not None else None,
                                              model_memory=_ready_cost(adapter, model))
        for box in (self.quick_ask.enabled, self.quick_ask.keep_model_ready):
            box.toggled.connect(self._follow_kept_ready)
        self._follow_kept_ready()
        self.server = ServerSettingsPage(settings.server, self)
        self.tools = ToolsSettingsPage(settings, servers, tools.choices if tools is not None else ToolChoices(),
                                       tools.statuses() if tools is not None else [], self)
        self.tools.editRequested.connect(self.edit_mcp_json)
        self.memory = MemorySettingsPage(settings.memory, self, show_memory, self)
        self.voice = VoiceSettingsPage(settings.voice, self, microphones=microphones,
                                       spawn=adapter.spawn if adapter is not None else None)
        self.tabs = QTabWidget(self)
        self.tabs.addTab(_FitScroll(self.general, self), "Chats a&nd model")
        self.quick_ask_tab = _FitScroll(self.quick_ask, self)
        self.tabs.addTab(self.quick_ask_tab, "&Quick ask")
        self.tabs.addTab(self.server, "AP&I server")
        self.tabs.addTab(self.tools, "&Tools")
        self.tabs.addTab(self.memory, "&Memory")
        self.tabs.addTab(self.voice, "&Voice")
        self.tabs.currentChanged.connect(lambda: self.voice.list_microphones() if self.tabs.currentWidget() is
                                         self.voice else None)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs)
        layout.addWidget(_buttons(self))
        fit_shortcut_letters(self)

    def value(self) -> Settings:
        settings = self.quick_ask.value(self._settings)
        return dataclasses.replace(settings, generation=self.form.value(), theme=self.theme.currentData(),
                                   device_preference=self.device.currentData(),
                                   threads=self.threads.value() or None,
                                   when_hidden=self.when_hidden.currentData(),
                                   when_in_background=self.when_in_background.currentData(),
                                   unload_after_minutes=self._unload_after(),
                                   exit_engine_when_idle=self.exit_engine.isChecked(),
                                   gentle_fewer_threads=self.gentle_threads.isChecked(),
                                   comfortable_tokens_per_s=self._comfortable_speed(),
                                   saved_states_mb=self.saved_states.value(),
                                   prompt_lookup=self.prompt_lookup.currentData(),
                                   server=self.server.value(), memory=self.memory.form.value(),
                                   voice=self.voice.value(settings).voice)

    def show_page(self, page: str) -> None:
        """Open on a page: "quick_ask", "server", "tools", "memory" or "voice" (any other: the first)."""
        shown = {"quick_ask": self.quick_ask_tab, "server": self.server, "tools": self.tools,
                 "memory": self.memory, "voice": self.voice}.get(page)
        self.tabs.setCurrentIndex(0 if shown is None else self.tabs.indexOf(shown))

    def done(self, result: int) -> None:  # Override QDialog.done.
        if result != QDialog.DialogCode.Accepted:
            self.quick_ask.put_back_sign_in()
        super().done(result)

    def value_with_tools(self) -> Settings:
        """value() with the Tools page's limits."""
        return self.tools.value(self.value())

    def save_tools(self) -> None:
        """After OK: write the servers and tool choices the Tools page changed (off the UI thread)."""
        tools = self._tools
        if self._adapter is None or tools is None:
            return
        if self.tools.changed_servers():
            self._adapter.spawn(tools.save_servers(list(self.tools.servers)))
        if self.tools.changed_choices():
            self._adapter.spawn(tools.save_choices(self.tools.choices))

    def edit_mcp_json(self) -> None:
        """mcp.json as text; saved (and read again) only when Kestrel can read all of it."""
        if self._mcp_file is not None and self._adapter is not None and self._tools is not None:
            edit_mcp_json(self, self.tools, self._mcp_file, self._tools, self._adapter.spawn)

    async def _show_gpu_backend(self, model: "ModelDoor") -> None:
        if await lacks_gpu_backend(model):
            try:
                no_gpu_backend(self.device)
            except RuntimeError:
                pass  # the dialog was closed meanwhile

    # --- saved chat states and prompt lookup ------------------------------------------------

    def _add_speed_rows(self, form: QFormLayout, settings: Settings) -> None:
        self.saved_states = int_box(0, 1_000_000, settings.saved_states_mb)
        self.saved_states.setSingleStep(256)
        self.saved_states.setSuffix(" MB")
        self.saved_states.setSpecialValueText("off (chats are read again when reopened)")
        self.saved_states.setToolTip("Kestrel keeps the model's memory of recent chats (saved chat states: its KV "
                                     "cache) in the cache folder, so that reopening one, even after a restart, "
                                     "does not read the whole chat again. The least recently used go first when "
                                     "this space is full. Your chats themselves are never removed here.")
        self.clear_states = QPushButton("Free this space no&w", self)
        self.clear_states.setToolTip("Removes the kept model memory of your chats; the chats stay. The next "
                                     "time each is opened, the model reads it again.")
        self.clear_states.setEnabled(self._adapter is not None and self._model is not None)
        self.clear_states.clicked.connect(self._clear_states)
        self.states_note = QLabel("", self)
        self.states_note.setObjectName("savedStatesNote")
        self.states_note.setWordWrap(True)  # "3 chats kept, 10.5 MB now" must not push the page past its edge
        self.prompt_lookup = _choices(self, settings.prompt_lookup, (
            ("auto", "Automatic (when it helps)"), ("on", "On"), ("off", "Off")))
        self.prompt_lookup.setToolTip("Prompt lookup decoding: Kestrel guesses the next words from text already "
                                      "in the chat and has the model check them in one step, which is faster "
                                      "when an answer repeats its input (fixing code, rewriting). The answer is "
                                      "the model's own either way. Automatic keeps it on only while it saves "
                                      "time. A model's own setting wins.")
        clear_row = QHBoxLayout()
        clear_row.addWidget(self.clear_states)
        clear_row.addWidget(self.states_note, 1)
        form.addRow("Quick reopen of recent ch&ats", self.saved_states)
        form.addRow("", clear_row)
        form.addRow("Faster answers that cop&y from the chat", self.prompt_lookup)
        # Set once Clear is pressed: the usage read at opening may come back after the
        # clear, and must not write over what the clear says.
        self._clearing = False
        if self._adapter is not None:
            self._adapter.spawn(self._show_usage())

    async def _show_usage(self) -> None:
        from app.service.models import kv_cache

        files, size = await asyncio.to_thread(kv_cache.usage)
        if not self._clearing:
            self._note(f"{_chats(files)} kept, {human_size(size)} now" if files else "Nothing kept now")

    def _clear_states(self) -> None:
        """Ask the service to clear them; the dialog stays usable while it does."""
        if self._adapter is None or self._model is None:
            return
        self._clearing = True
        self.clear_states.setEnabled(False)
        self._note("Freeing…")
        self._adapter.spawn(self._clear(self._model))

    async def _clear(self, model: "ModelDoor") -> None:
        from app.service.models import kv_cache

        try:
            files, size = await asyncio.to_thread(kv_cache.usage)
            await model.clear_saved_states()
        except Exception as exc:  # noqa: BLE001 - said in the dialog, the settings stay usable
            self._note(f"Could not free the space: {exc}")
        else:
            self._note(f"Freed {human_size(size)} ({_chats(files)})" if files else "Nothing was kept")
        try:
            self.clear_states.setEnabled(True)
        except RuntimeError:
            pass  # the dialog was closed meanwhile

    def _note(self, text: str) -> None:
        try:
            self.states_note.setText(text)
        except RuntimeError:
            pass  # the dialog was closed meanwhile

    def _comfortable_speed(self) -> float:
        # A value the box rounds (12.345 set in the file) stays as it was unless changed.
        shown = self.comfortable_speed.value()
        return self._settings.comfortable_tokens_per_s if shown == self._comfortable_shown else shown

    def _follow_kept_ready(self) -> None:
        """While quick ask keeps the model ready, it is never unloaded when idle: the unload controls say so,
        greyed, instead of seeming to work (their values are kept for when it is turned off)."""
        kept = self.quick_ask.enabled.isChecked() and self.quick_ask.keep_model_ready.isChecked()
        for control in (self.unload_after, self.exit_engine):
            control.setEnabled(not kept)
        self.unload_after.setToolTip(
            KEPT_READY_WORDS if kept else "After this long without an answer the model is unloaded to give its "
                                          "memory back; your next message loads it again.")

    def _unload_after(self) -> float | None:
        minutes = self.unload_after.value()
        if not minutes:
            return None
        kept = self._settings.unload_after_minutes
        # A value the dialog cannot show exactly (set in the file) stays as it was unless changed.
        return kept if kept is not None and round(kept) == minutes else float(minutes)


class EditMessageDialog(QDialog):
    """Change a message before sending it again."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Edit and resend")
        self.edit = QPlainTextEdit(text, self)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("The answers after this message will be replaced.", self))
        layout.addWidget(self.edit)
        layout.addWidget(_buttons(self, ok_text="Resend"))

    def text(self) -> str:
        return self.edit.toPlainText()


class _FitScroll(QScrollArea):
    """A page that asks for all of its height, but no more than most of the screen, and
    scrolls beyond it: Settings' first page is taller than a 1080p screen at 200%."""

    def __init__(self, page: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setWidget(page)
        self._page = page

    def sizeHint(self) -> QSize:  # Override QScrollArea.sizeHint.
        page = self._page.sizeHint()
        screen = self.screen().availableGeometry()
        bar = self.verticalScrollBar().sizeHint().width()
        return QSize(page.width() + bar, min(page.height(), int(screen.height() * 0.75)))


def _comfortable_speed_box(value: float) -> QDoubleSpinBox:
    """The decode speed at which a model "runs well" in the model manager's verdicts."""
    box = double_box(1.0, 1000.0, 1.0, value)
    box.setDecimals(1)
    box.setSuffix(" tokens/s")
    box.setToolTip("How fast a model must write for you to read along comfortably. The model manager says a "
                   "model runs well at this speed or faster, usable from half of it and slow below that, and "
                   "recommends the best model that runs well here. 10 is a little above reading speed.")
    return box


def _thinking_default_note(model: "ModelDoor | None") -> str:
    """Beside the default for new chats: when the model in use cannot follow it, say so (the
    default still applies to the models that can)."""
    loaded = model.loaded if model is not None else None
    if loaded is None or loaded.thinking_switch:
        return ""
    return ("Only for models that can, such as Qwen3: the model in use always thinks first." if loaded.thinks
            else "Only for models that can, such as Qwen3: the model in use cannot think before answering.")


def _ready_cost(adapter: "ServiceAdapter | None", model: "ModelDoor | None") -> str:
    """What keeping the model loaded costs, from the models the window lists and the one in use."""
    rows = adapter.installed.rows() if adapter is not None else []
    return ready_cost_words(rows, model.model if model is not None else None)


def _chats(count: int) -> str:
    return f"{count} chat{'' if count == 1 else 's'}"


def _buttons(dialog: QDialog, ok_text: str | None = None) -> QDialogButtonBox:
    box = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, dialog)
    if ok_text:
        box.button(QDialogButtonBox.StandardButton.Ok).setText(ok_text)
    box.accepted.connect(dialog.accept)
    box.rejected.connect(dialog.reject)
    return box


def _choices(parent: QWidget, current: str, choices: tuple[tuple[str, str], ...]) -> QComboBox:
    combo = QComboBox(parent)
    for value, text in choices:
        combo.addItem(text, value)
    combo.setCurrentIndex(max(0, combo.findData(current)))
    return combo
