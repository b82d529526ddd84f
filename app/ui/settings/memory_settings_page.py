"""Settings' Memory page: the Memory window's own settings form, and a way to the memories themselves."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from PySide6.QtWidgets import QDialog, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.core.memory_settings import MemorySettings
from app.core.settings import Settings
from app.ui.memory.memory_parts import MemorySettingsForm

NOTE = ("Kestrel keeps short facts about you, such as “My daughter is called Ada.”, in your chat history on this "
        "computer, and gives new answers the ones that matter to them. They never leave this computer.")


class MemorySettingsPage(QWidget):
    """`form` is MemorySettingsForm (the same the Memory window shows: one form for one group of settings);
    `open_memory` ("Open Memory…") closes Settings as OK does, then shows the Memory window (`show_memory`),
    so its own copy of these settings is never edited beside this one. Without `show_memory` it is hidden."""

    def __init__(self, settings: MemorySettings, dialog: QDialog, show_memory: Callable[[], None] | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._dialog, self._show_memory = dialog, show_memory
        note = QLabel(NOTE, self)
        note.setWordWrap(True)
        self.form = MemorySettingsForm(settings, self)
        self.open_memory = QPushButton("Open M&emory…", self)
        self.open_memory.setToolTip("Save these settings and see, add, change or forget what Kestrel remembers")
        self.open_memory.clicked.connect(self._open)
        self.open_memory.setVisible(show_memory is not None)
        row = QHBoxLayout()
        row.addWidget(self.open_memory)
        row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addWidget(note)
        layout.addSpacing(6)
        layout.addWidget(self.form)
        layout.addSpacing(6)
        layout.addLayout(row)
        layout.addStretch(1)

    def value(self, settings: Settings) -> Settings:
        """`settings` with this page's memory settings."""
        return dataclasses.replace(settings, memory=self.form.value())

    def _open(self) -> None:
        self._dialog.accept()  # saved as OK saves them, before the Memory window shows its own form
        if self._show_memory is not None:
            self._show_memory()
