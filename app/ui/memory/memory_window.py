"""The Memory window: what Kestrel remembers about the person, where each memory came from, and the memory settings."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import (QDialog, QHBoxLayout, QLabel, QMessageBox, QPushButton, QStackedWidget, QVBoxLayout,
                               QWidget)

from app.core.memories import Memory, MemoryOrigin, MemoryRefused
from app.core.memory_settings import MemorySettings
from app.core.store.history_errors import HistoryError
from app.service.memory_events import MemoriesChanged
from app.ui.common.warning_row import WarningRow
from app.ui.memory.memory_parts import MemorySettingsForm, MemoryTextDialog, memories_table, show_whole
from app.ui.memory.memory_table import MemoryTableModel
from app.ui.memory.memory_words import count_words

if TYPE_CHECKING:
    from app.service.doors.memory import MemoryDoor
    from app.service.doors.settings import SettingsDoor
    from app.service.event_bus import Listener
    from app.ui.state.adapter import ServiceAdapter

EMPTY_WORDS = ("Kestrel remembers nothing about you yet.\n\nSay “Remember that…” in a chat, or add a memory "
               "here: a short fact such as “My daughter is called Ada.”")
GONE_WORDS = "That memory was forgotten meanwhile (perhaps in another Kestrel window)."


def clear_question(count: int) -> str:
    return (f"Forget all {count_words(count)}? They are removed from this computer, and chats' saved states "
            "that hold them are cleared. This cannot be undone.")


def delete_question(memory: Memory) -> str:
    return f"Forget “{_short(memory.text)}”? It is removed from this computer. This cannot be undone."


def _short(text: str, most: int = 80) -> str:
    return text if len(text) <= most else text[:most - 1].rstrip() + "…"


class MemoryWindow(QDialog):
    """Not modal: the chat goes on while it is open. It reads the memories through MemoryDoor off the UI
    thread and follows MemoriesChanged, whoever changed them (this window, a chat's remember tool,
    another Kestrel); its settings are saved as soon as they are changed.

    Parts tests reach for: `settings_form` (MemorySettingsForm), `table` (a QTableView over `model`, a
    MemoryTableModel), `count`, `stack` (`empty` while there are none, else `table`), `add`, `edit`, `switch` (turn the
    selected one off or on), `delete`, `clear`, `problem` (a WarningRow: a refused change, in plain
    words). `ask_text` and `confirm` are the dialogs it asks through (tests replace them).
    """

    def __init__(self, adapter: "ServiceAdapter", memory: "MemoryDoor", settings: "SettingsDoor",
                 subscribe: Callable[["Listener"], Callable[[], None]], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._adapter, self._memory, self._settings = adapter, memory, settings
        self._loading = False
        self._stale = False  # a change heard while the list was being read: read it again after
        self.setWindowTitle("Memory")
        self.setModal(False)
        self.settings_form = MemorySettingsForm(settings.settings.memory, self)
        self.settings_form.changed.connect(self._save_settings)
        self.model = MemoryTableModel(self._chat_title, self.set_enabled)
        self.model.setParent(self)  # goes with the window, and so do the connections to it
        self.table = memories_table(self.model, self)
        self.table.selectionModel().selectionChanged.connect(self._update_buttons)
        self.table.doubleClicked.connect(lambda _index: self.edit_selected())
        delete_key = QShortcut(QKeySequence.StandardKey.Delete, self.table)
        delete_key.setContext(Qt.ShortcutContext.WidgetShortcut)
        delete_key.activated.connect(self.delete_selected)  # it asks first, as the button does
        self.count = QLabel(self)
        self.count.setObjectName("memoryCount")
        self.empty = QLabel(EMPTY_WORDS, self)
        self.empty.setObjectName("memoryEmpty")
        self.empty.setWordWrap(True)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setContentsMargins(24, 24, 24, 24)
        self.stack = QStackedWidget(self)
        self.stack.addWidget(self.empty)
        self.stack.addWidget(self.table)
        self.problem = WarningRow("", self)
        self.problem.hide()
        self.add = self._button("&Add…", "Add a fact for Kestrel to remember", self.add_memory)
        self.edit = self._button("&Edit…", "Change the selected memory's words", self.edit_selected)
        self.switch = self._button("Turn o&ff", "Keep the selected memory but do not use it in answers",
                                   self.switch_selected)
        self.delete = self._button("&Delete…", "Forget the selected memory", self.delete_selected)
        self.clear = self._button("&Clear all…", "Forget every memory", self.clear_all)
        self._lay_out()
        for changed in (self.model.rowsInserted, self.model.rowsRemoved, self.model.modelReset):
            changed.connect(self._update_count)
        self.model.dataChanged.connect(lambda *_: self._update_count())  # one turned off or on
        adapter.settingsChanged.connect(self._settings_changed)
        conversations = adapter.conversations  # a chat renamed or deleted: the From column follows
        for renamed in (conversations.dataChanged, conversations.modelReset, conversations.rowsRemoved):
            renamed.connect(self.model.chats_renamed)
        self._unsubscribe = subscribe(self._heard)
        self.destroyed.connect(self._unsubscribe)
        self._update_count()
        self._size_to_screen()
        self.reload()

    # --- building -------------------------------------------------------------------------

    def _button(self, text: str, tip: str, slot: Callable[[], object]) -> QPushButton:
        button = QPushButton(text, self)
        button.setToolTip(tip)
        button.clicked.connect(slot)
        return button

    def _lay_out(self) -> None:
        heading = QLabel("What Kestrel remembers about you", self)
        font = heading.font()
        font.setBold(True)
        heading.setFont(font)
        top = QHBoxLayout()
        top.addWidget(heading)
        top.addWidget(self.count, 1)
        buttons = QHBoxLayout()
        for button in (self.add, self.edit, self.switch, self.delete):
            buttons.addWidget(button)
        buttons.addStretch(1)
        buttons.addWidget(self.clear)
        close = QPushButton("Close", self)
        close.setObjectName("memoryClose")
        close.clicked.connect(self.close)
        bottom = QHBoxLayout()
        note = QLabel("Memories are kept in your chat history on this computer and never leave it.", self)
        note.setWordWrap(True)
        bottom.addWidget(note, 1)
        bottom.addWidget(close, 0, Qt.AlignmentFlag.AlignBottom)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 16, 16, 12)
        layout.setSpacing(10)
        layout.addWidget(self.settings_form)
        layout.addWidget(self.problem)
        layout.addLayout(top)
        layout.addWidget(self.stack, 1)
        layout.addLayout(buttons)
        layout.addLayout(bottom)

    def _size_to_screen(self) -> None:
        """820×600, or less where the screen is smaller (a laptop at 200% leaves 960×540)."""
        screen = (self.parentWidget() or self).screen() or QGuiApplication.primaryScreen()
        room = screen.availableGeometry()
        hint = self.sizeHint()
        self.resize(min(max(820, hint.width()), room.width() * 9 // 10),
                    min(max(600, hint.height()), room.height() * 9 // 10))

    # --- what the service says --------------------------------------------------------------

    def reload(self) -> None:
        """Read every memory again (off the UI thread)."""
        if self._loading:
            self._stale = True
            return
        self._loading = True
        self._spawn(self._load())

    async def _load(self) -> None:
        try:
            memories = await self._memory.listing()
        finally:
            self._loading = False
        selected = self.selected()
        self.model.reset_to(memories)
        self._select(selected.id if selected is not None else None)
        if self._stale:
            self._stale = False
            self.reload()

    def _heard(self, event: object) -> None:
        if not isinstance(event, MemoriesChanged):
            return
        if self._loading:
            self._stale = True
        elif not self.model.apply(event):
            self.reload()
        self._update_buttons()

    def _settings_changed(self) -> None:
        memory = self._settings.settings.memory
        if memory != self.settings_form.value():
            self.settings_form.show_settings(memory)

    def _chat_title(self, conversation_id: int) -> str | None:
        found = self._adapter.conversations.conversation(conversation_id)
        return found.title if found is not None else None

    def _update_count(self) -> None:
        count = self.model.rowCount()
        off = sum(1 for memory in self.model.memories() if not memory.enabled)
        self.count.setText(f"  {count_words(count)}" + (f", {off:,} turned off" if off else "") if count else "")
        self.stack.setCurrentWidget(self.table if count else self.empty)
        show_whole(self.table, count)
        self._update_buttons()

    def _update_buttons(self) -> None:
        memory = self.selected()
        for button in (self.edit, self.switch, self.delete):
            button.setEnabled(memory is not None)
        self.switch.setText("Turn o&n" if memory is not None and not memory.enabled else "Turn o&ff")
        self.switch.setToolTip("Use the selected memory in answers again" if memory is not None and not memory.enabled
                               else "Keep the selected memory but do not use it in answers")
        self.clear.setEnabled(self.model.rowCount() > 0)

    # --- what the person does -------------------------------------------------------------

    def selected(self) -> Memory | None:
        rows = self.table.selectionModel().selectedRows()
        if not rows or rows[0].row() >= self.model.rowCount():
            return None
        return self.model.memory(rows[0].row())

    def _select(self, memory_id: int | None) -> None:
        row = self.model.row_of(memory_id) if memory_id is not None else None
        if row is not None:
            self.table.selectRow(row)
            self.table.scrollTo(self.model.index(row, 0))
        self._update_buttons()

    def ask_text(self, title: str, text: str) -> str | None:
        dialog = MemoryTextDialog(title, text, self)
        return dialog.text() if dialog.exec() == QDialog.DialogCode.Accepted else None

    def confirm(self, question: str) -> bool:
        return QMessageBox.question(self, "Memory", question) == QMessageBox.StandardButton.Yes

    def add_memory(self) -> None:
        text = self.ask_text("Add a memory", "")
        if text is not None:
            self._spawn(self._add(text))

    async def _add(self, text: str) -> None:
        added = await self._memory.add(text, MemoryOrigin.HAND)
        if self.model.row_of(added.memory.id) is None:  # the same text kept already: no change was said
            self.model.apply(MemoriesChanged(changed=(added.memory,)))
        self._select(added.memory.id)

    def edit_selected(self) -> None:
        memory = self.selected()
        if memory is None:
            return
        text = self.ask_text("Edit a memory", memory.text)
        if text is not None and text != memory.text:
            self._spawn(self._memory.edit(memory.id, text))

    def switch_selected(self) -> None:
        memory = self.selected()
        if memory is not None:
            self.set_enabled(memory.id, not memory.enabled)

    def set_enabled(self, memory_id: int, on: bool) -> None:
        """Turn a memory on or off (the table's tick and the Turn off button)."""
        self._spawn(self._memory.set_enabled(memory_id, on))

    def delete_selected(self) -> None:
        memory = self.selected()
        if memory is not None and self.confirm(delete_question(memory)):
            self._spawn(self._memory.remove(memory.id))

    def clear_all(self) -> None:
        count = self.model.rowCount()
        if count and self.confirm(clear_question(count)):
            self._spawn(self._memory.clear())

    def _save_settings(self, memory: object) -> None:
        assert isinstance(memory, MemorySettings)
        door = self._settings
        self._adapter.spawn(door.update_settings(dataclasses.replace(door.settings, memory=memory)))

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        self._adapter.spawn(self._said(work))

    async def _said(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run a memory call; one refused (the person's words, the disk) is said here until the next goes through."""
        try:
            await work
        except (MemoryRefused, HistoryError) as exc:
            self._show_problem(str(exc))
            return
        except KeyError:
            self._show_problem(GONE_WORDS)
            self.reload()
            return
        try:
            self.problem.hide()
        except RuntimeError:
            pass  # the window was closed meanwhile

    def _show_problem(self, text: str) -> None:
        try:
            self.problem.text.setText(text)
            self.problem.show()
        except RuntimeError:
            pass  # the window was closed meanwhile

    def showEvent(self, event: Any) -> None:  # Override QDialog.showEvent: what may have changed while hidden.
        super().showEvent(event)
        if not self._loading:
            self.reload()
