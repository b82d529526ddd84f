"""Editing mcp.json as text, checked with Kestrel's own reader before it is saved; and a chat's server checklist."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QLabel, QListWidget, QListWidgetItem, QPlainTextEdit,
                               QVBoxLayout, QWidget)

from app.tools.mcp_config import McpServerConfig, read_mcp_config, read_mcp_text, write_mcp_text

if TYPE_CHECKING:
    from app.service.doors.settings import ToolsDoor
    from app.ui.settings.tools_settings_page import ToolsSettingsPage

EXAMPLE = '{\n  "mcpServers": {\n    "time": {"command": "uvx", "args": ["mcp-server-time"]}\n  }\n}\n'


def check_mcp_text(text: str) -> tuple[list[McpServerConfig], list[str]]:
    """The servers the text holds and its problems in plain words, as Kestrel will read the file."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mcp.json"
        path.write_text(text, encoding="utf-8")
        servers, problems = read_mcp_config(path)
    return servers, [problem.replace(str(path), "mcp.json") for problem in problems]


class McpJsonDialog(QDialog):
    """mcp.json in a plain-text editor; Save is refused, with the reasons, while Kestrel cannot read it all."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Edit mcp.json")
        self.resize(640, 480)
        self.edit = QPlainTextEdit(text or EXAMPLE, self)
        self.edit.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.edit.setAccessibleName("mcp.json")
        self.edit.setTabChangesFocus(False)
        self.problems = QLabel(self)
        self.problems.setObjectName("mcpProblems")
        self.problems.setWordWrap(True)
        self.problems.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.problems.hide()
        box = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel, self)
        box.accepted.connect(self._save)
        box.rejected.connect(self.reject)
        intro = QLabel("The servers Kestrel may start, in the format of Claude Desktop, Cursor and LM Studio: "
                       "\"command\", \"args\" and \"env\" for a program, \"url\" and \"headers\" for a web server.", self)
        intro.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.edit, 1)
        layout.addWidget(self.problems)
        layout.addWidget(box)
        self.servers: list[McpServerConfig] = []

    def text(self) -> str:
        return self.edit.toPlainText()

    def _save(self) -> None:
        servers, problems = check_mcp_text(self.text())
        if problems:
            self.problems.setText("Not saved: " + " ".join(problems))
            self.problems.show()
            return
        self.servers = servers
        self.accept()


def edit_mcp_json(parent: QWidget, page: "ToolsSettingsPage", path: Path, tools: "ToolsDoor",
                  spawn: Callable[[Coroutine[Any, Any, Any]], Any]) -> None:
    """Open the editor on the file; once saved, the tools read it again and the page shows what it holds."""
    try:
        text = read_mcp_text(path)  # a regular file of at most 1 MB: never a pipe that hangs the window
    except (OSError, UnicodeDecodeError) as exc:
        page.say(f"Kestrel could not read {path}: {exc}")
        return
    editor = McpJsonDialog(text, parent)
    if editor.exec():
        spawn(_write(page, path, editor.text(), tools))


async def _write(page: "ToolsSettingsPage", path: Path, text: str, tools: "ToolsDoor") -> None:
    try:
        await asyncio.to_thread(write_mcp_text, path, text)  # through a link to its target
    except OSError as exc:
        page.say(f"Kestrel could not save {path}: {exc.strerror or exc}.")
        return
    await tools.reload()
    try:
        page.set_servers(tools.servers())
    except RuntimeError:
        pass  # the dialog was closed meanwhile


class ServerChecklist(QListWidget):
    """The MCP servers a chat may offer the model, one checkbox each (GenerationSettings.tools).

    A name the chat has that mcp.json no longer holds stays listed, so that saving does
    not drop it unasked.
    """

    def __init__(self, servers: Sequence[str], chosen: Sequence[str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatTools")
        self.setAccessibleName("Tools this chat may use")
        for name in [*servers, *(name for name in chosen if name not in servers)]:
            item = QListWidgetItem(name if name in servers else f"{name} (not in mcp.json)", self)
            item.setData(Qt.ItemDataRole.UserRole, name)
            item.setCheckState(Qt.CheckState.Checked if name in chosen else Qt.CheckState.Unchecked)
        rows = max(1, min(5, self.count()))
        self.setFixedHeight(self.sizeHintForRow(0) * rows + 2 * self.frameWidth() + 4 if self.count() else 0)
        self.setVisible(bool(self.count()))

    def chosen(self) -> tuple[str, ...]:
        return tuple(item.data(Qt.ItemDataRole.UserRole) for item in (self.item(row) for row in range(self.count()))
                     if item.checkState() == Qt.CheckState.Checked)
