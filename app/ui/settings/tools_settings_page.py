"""The Settings dialog's "Tools" page: the MCP servers, their state and tools, what is always allowed, the limits."""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QFormLayout, QHBoxLayout, QLabel, QLineEdit, QPlainTextEdit, QPushButton, QSizePolicy,
                               QSpinBox, QToolButton, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget)

from app.core.settings import Settings
from app.tools.choices import ToolChoices
from app.tools.mcp_config import McpServerConfig
from app.tools.values import ServerState, ServerStatus

STATE_WORDS = {ServerState.STOPPED: "not started (starts when a chat uses it)", ServerState.STARTING: "starting…",
               ServerState.READY: "ready", ServerState.FAILED: "failed"}
_SERVER = Qt.ItemDataRole.UserRole + 1  # a row's (server, tool or "") key


def parse_where(text: str) -> tuple[str | None, tuple[str, ...], str | None]:
    """(command, args, url) from what the user typed: a URL, or a command line (quotes as a shell reads them)."""
    text = text.strip()
    if text.startswith(("http://", "https://")):
        return None, (), text
    words = shlex.split(text)
    return (words[0] if words else None), tuple(words[1:]), None


def _number(parent: QWidget, low: int, high: int, value: int) -> QSpinBox:
    box = QSpinBox(parent)
    box.setRange(low, high)
    box.setValue(value)
    box.setGroupSeparatorShown(True)
    box.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
    return box


class ToolsSettingsPage(QWidget):
    """The servers (from mcp.json) and tool choices as controls; kept here until the dialog's OK.

    `servers` and `choices` are what the page shows now; `changed_servers()` and
    `changed_choices()` say whether OK must save them. set_statuses() follows the pool
    (ToolServersChanged). editRequested: "Edit mcp.json…" was pressed (the dialog opens the editor).
    """

    editRequested = Signal()

    def __init__(self, settings: Settings, servers: Sequence[McpServerConfig], choices: ToolChoices,
                 statuses: Sequence[ServerStatus], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._first_servers, self._first_choices = list(servers), choices
        self.servers, self.choices = list(servers), choices
        self._statuses = {status.name: status for status in statuses}
        self.tree = QTreeWidget(self)
        self.tree.setObjectName("toolServers")
        self.tree.setHeaderLabels(["Server and its tools", "State"])
        self.tree.setAccessibleName("MCP servers and their tools; check one to let chats use it")
        self.tree.setRootIsDecorated(True)
        self.tree.setUniformRowHeights(True)
        self.tree.itemChanged.connect(self._item_changed)
        self.tree.currentItemChanged.connect(lambda *_: self._show_details())
        self.details = QLabel(self)
        self.details.setObjectName("toolServerDetails")
        self.details.setWordWrap(True)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.stderr_toggle = QToolButton(self)
        self.stderr_toggle.setText("Last output of the server")
        self.stderr_toggle.setCheckable(True)
        self.stderr_toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.stderr_toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.stderr_toggle.toggled.connect(self._stderr_toggled)
        self.stderr = QPlainTextEdit(self)
        self.stderr.setReadOnly(True)
        self.stderr.setAccessibleName("The server's last lines of error output")
        self.stderr.setFixedHeight(self.stderr.fontMetrics().lineSpacing() * 6 + 14)
        self.stderr.hide()
        self.remove_button = QPushButton("&Remove server", self)
        self.remove_button.clicked.connect(self._remove_current)
        self.edit_button = QPushButton("&Edit mcp.json…", self)
        self.edit_button.clicked.connect(self.editRequested)
        self.name = QLineEdit(self)
        self.name.setPlaceholderText("time")
        self.name.setAccessibleName("New server's name")
        self.where = QLineEdit(self)
        self.where.setPlaceholderText("uvx mcp-server-time   or   http://127.0.0.1:8000/mcp")
        self.where.setAccessibleName("New server's command line or URL")
        self.add_button = QPushButton("&Add server", self)
        self.add_button.clicked.connect(self._add)
        self.add_note = QLabel(self)
        self.add_note.setObjectName("addServerNote")
        self.add_note.setWordWrap(True)
        self.add_note.hide()
        self.allowed_box = QVBoxLayout()
        self.allowed_box.setContentsMargins(0, 0, 0, 0)
        self.revoke_buttons: dict[tuple[str, str], QPushButton] = {}
        self.rounds = _number(self, 1, 100, settings.tool_rounds)
        self.rounds.setToolTip("How many times one answer may call tools before it must answer.")
        self.result_chars = _number(self, 1_000, 10_000_000, settings.tool_result_chars)
        self.result_chars.setSingleStep(1_000)
        self.result_chars.setSuffix(" characters")
        self.result_chars.setToolTip("A longer tool result is cut, with a note saying so, before the model reads it.")
        self._lay_out()
        self._fill()

    def _lay_out(self) -> None:
        intro = QLabel("Tools come from MCP servers you add here (the mcp.json format of Claude Desktop, Cursor "
                       "and LM Studio). A chat offers the model the tools of the servers chosen in its Chat settings, "
                       "and every call asks you first unless you always allow that tool.", self)
        intro.setWordWrap(True)
        server_buttons = QHBoxLayout()
        server_buttons.addWidget(self.remove_button)
        server_buttons.addStretch(1)
        server_buttons.addWidget(self.edit_button)
        add_row = QHBoxLayout()
        add_row.addWidget(self.name, 1)
        add_row.addWidget(self.where, 3)
        add_row.addWidget(self.add_button)
        allowed_label = QLabel("Always allowed (run without asking)", self)
        allowed_label.setObjectName("alwaysAllowedLabel")
        bold = allowed_label.font()
        bold.setBold(True)
        allowed_label.setFont(bold)
        form = QFormLayout()
        rounds_label = QLabel("Tool &rounds per answer", self)
        rounds_label.setBuddy(self.rounds)
        size_label = QLabel("Longest tool re&sult", self)
        size_label.setBuddy(self.result_chars)
        form.addRow(rounds_label, self.rounds)
        form.addRow(size_label, self.result_chars)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.tree, 1)
        layout.addWidget(self.details)
        layout.addWidget(self.stderr_toggle)
        layout.addWidget(self.stderr)
        layout.addLayout(server_buttons)
        layout.addLayout(add_row)
        layout.addWidget(self.add_note)
        layout.addSpacing(8)
        layout.addWidget(allowed_label)
        layout.addLayout(self.allowed_box)
        layout.addLayout(form)

    # --- showing -------------------------------------------------------------------------

    def set_statuses(self, statuses: Sequence[ServerStatus]) -> None:
        """The pool's servers changed state (ToolServersChanged)."""
        self._statuses = {status.name: status for status in statuses}
        self._fill()

    def set_servers(self, servers: Sequence[McpServerConfig]) -> None:
        """mcp.json was edited as text and saved: show what it holds now (and keep it as saved)."""
        self._first_servers = list(servers)
        self.servers = list(servers)
        self._fill()

    def _fill(self) -> None:
        current = self.tree.currentItem()
        chosen = current.data(0, _SERVER) if current is not None else None
        self.tree.blockSignals(True)
        self.tree.clear()
        for server in self.servers:
            status = self._statuses.get(server.name)
            item = QTreeWidgetItem([server.name, self._state_words(server.name, server.enabled)])
            item.setData(0, _SERVER, (server.name, ""))
            item.setCheckState(0, Qt.CheckState.Checked if server.enabled else Qt.CheckState.Unchecked)
            item.setToolTip(0, server.where)
            self.tree.addTopLevelItem(item)
            for tool in status.tools if status is not None else ():
                child = QTreeWidgetItem([tool.name, ""])
                child.setData(0, _SERVER, (server.name, tool.name))
                child.setToolTip(0, tool.description)
                on = self.choices.is_enabled(server.name, tool.name)
                child.setCheckState(0, Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
                item.addChild(child)
            item.setExpanded(True)
            if chosen == (server.name, ""):
                self.tree.setCurrentItem(item)
        self.tree.blockSignals(False)
        self.tree.resizeColumnToContents(0)
        first = self.tree.topLevelItem(0)
        if self.tree.currentItem() is None and first is not None:
            self.tree.setCurrentItem(first)
        self._show_details()
        self._fill_allowed()

    def _show_details(self) -> None:
        server = self._current_server()
        self.remove_button.setEnabled(server is not None)
        if server is None:
            self.details.setText("No MCP server yet: add one below, or edit mcp.json." if not self.servers else "")
            self.stderr_toggle.hide()
            self.stderr.hide()
            return
        status = self._statuses.get(server.name)
        words = [f"{server.name}: {server.where}"]
        if status is not None and status.error:
            words.append(f"Last error: {status.error}")
        self.details.setText("\n".join(words))
        tail = status.stderr_tail if status is not None else ()
        self.stderr.setPlainText("\n".join(tail))
        self.stderr_toggle.setVisible(bool(tail))
        self.stderr.setVisible(bool(tail) and self.stderr_toggle.isChecked())

    def _fill_allowed(self) -> None:
        while self.allowed_box.count():
            taken = self.allowed_box.takeAt(0)
            gone = taken.widget() if taken is not None else None
            if gone is not None:
                gone.deleteLater()
        self.revoke_buttons = {}
        allowed = sorted(self.choices.always_allowed)
        if not allowed:
            none = QLabel("None: every call asks first.", self)
            none.setObjectName("noneAllowed")
            self.allowed_box.addWidget(none)
        for server, tool in allowed:
            row = QWidget(self)
            line = QHBoxLayout(row)
            line.setContentsMargins(0, 0, 0, 0)
            line.addWidget(QLabel(f"{tool} from {server}", row), 1)
            revoke = QPushButton("Revoke", row)
            revoke.setAccessibleName(f"Revoke: {tool} from {server} asks again")
            revoke.clicked.connect(lambda _=False, key=(server, tool): self._revoke(*key))
            line.addWidget(revoke)
            self.revoke_buttons[(server, tool)] = revoke
            self.allowed_box.addWidget(row)

    def _stderr_toggled(self, shown: bool) -> None:
        self.stderr_toggle.setArrowType(Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow)
        self.stderr.setVisible(shown)

    # --- changing --------------------------------------------------------------------------

    def _current_server(self) -> McpServerConfig | None:
        item = self.tree.currentItem()
        if item is None:
            return None
        name = item.data(0, _SERVER)[0]
        return next((server for server in self.servers if server.name == name), None)

    def _item_changed(self, item: QTreeWidgetItem, column: int) -> None:
        server, tool = item.data(0, _SERVER)
        on = item.checkState(0) == Qt.CheckState.Checked
        if tool:
            self.choices = self.choices.enabling(server, tool) if on else self.choices.disabling(server, tool)
            return
        self.servers = [dataclasses.replace(s, enabled=on) if s.name == server else s for s in self.servers]
        self.tree.blockSignals(True)
        item.setText(1, self._state_words(server, on))
        self.tree.blockSignals(False)

    def _state_words(self, server: str, enabled: bool) -> str:
        if not enabled:
            return "turned off"
        status = self._statuses.get(server)
        return STATE_WORDS[status.state if status is not None else ServerState.STOPPED]

    def _revoke(self, server: str, tool: str) -> None:
        self.choices = self.choices.revoking(server, tool)
        self._fill_allowed()

    def _remove_current(self) -> None:
        server = self._current_server()
        if server is not None:
            self.servers = [s for s in self.servers if s.name != server.name]
            self.choices = self.choices.forgetting_server(server.name)
            self._fill()

    def _add(self) -> None:
        name, where = self.name.text().strip(), self.where.text().strip()
        problem = ""
        try:
            command, args, url = parse_where(where)
        except ValueError as exc:
            command, args, url, problem = None, (), None, f"The command line has a problem ({exc}): check its quotes."
        if not name or not (command or url):
            problem = problem or "Give the server a name and the command that starts it (or its URL)."
        elif any(server.name == name for server in self.servers):
            problem = f"There is already a server named “{name}”: choose another name."
        self.say(problem)
        if problem:
            return
        self.servers.append(McpServerConfig(name=name, command=command, args=args, url=url))
        self.name.clear()
        self.where.clear()
        self._fill()

    def say(self, text: str) -> None:
        """A problem with what the page was asked to do, under the Add row."""
        self.add_note.setText(text)
        self.add_note.setVisible(bool(text))

    # --- reading back ----------------------------------------------------------------------

    def changed_servers(self) -> bool:
        return self.servers != self._first_servers

    def changed_choices(self) -> bool:
        return self.choices != self._first_choices

    def value(self, settings: Settings) -> Settings:
        """settings with the page's limits."""
        return dataclasses.replace(settings, tool_rounds=self.rounds.value(),
                                   tool_result_chars=self.result_chars.value())

