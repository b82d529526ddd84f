"""The API server window: its state, address and key, and the requests it answered lately."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (QCheckBox, QDialog, QFormLayout, QHBoxLayout, QHeaderView, QLabel, QLineEdit,
                               QMessageBox, QPushButton, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from app.core.paths import data_paths
from app.core.server_settings import LOOPBACK, new_key
from app.server.link.files import LinkFiles
from app.service.events import RequestRecord
from app.ui.common import icons
from app.ui.common.warning_row import WarningRow
from app.ui.server.link_section import LinkSection

if TYPE_CHECKING:
    from app.service.api.api_answers import ApiAnswers
    from app.service.doors.settings import SettingsDoor
    from app.ui.state.adapter import ServiceAdapter
    from app.ui.server.server_host import ServerHost

LISTENING_BEYOND = ("Other devices on your network can reach your models through this PC's address, with the key. "
                    "If this network is not one you trust, turn “Allow other devices” off in Settings.")
COLUMNS = ("Time", "Client", "Endpoint", "Model", "Tokens", "Tokens/s", "Status")
KEPT_ROWS = 100
NEW_KEY_QUESTION = ("Make a new key? Programs that use the current one get “401 unauthorized” until you give them "
                    "the new key.")


def request_cells(record: RequestRecord) -> tuple[str, ...]:
    """One request as the table's row shows it."""
    used = record.prompt_tokens or record.completion_tokens
    tokens = f"{record.prompt_tokens} in, {record.completion_tokens} out" if used else "–"
    speed = f"{record.tokens_per_s:.1f}" if record.tokens_per_s > 0 else "–"
    return (record.at.astimezone().strftime("%H:%M:%S"), record.client, record.endpoint, record.model or "–",
            tokens, speed, str(record.status))


def state_words(host: "ServerHost") -> str:
    if host.on:
        return "On: other programs can use your models."
    if host.starting:
        return "Starting…"
    if host.failed:
        return f"Could not start: {host.error or 'no reason was given.'}"
    return "Off: no program can use your models through it. Turn it on here."


def address_words(host: "ServerHost") -> str:
    """How clients are pointed at the server, with its address in (or in general while it is off)."""
    shown = host.client_address or "the address"
    others = (f"\nOther devices: this PC's network address instead of {LOOPBACK}."
              if host.on_every_address else "")
    # Short lines, not wrapped: a wrapped label in a form is laid out too tall (Qt).
    return (f"OpenAI clients: base URL {shown}/v1 · Anthropic clients: {shown}{others}\n"
            "The key goes in the Authorization header as “Bearer key” (or in x-api-key).")


def status_words(host: "ServerHost") -> str:
    """The status line's words for the server; "" while it is off (the part is hidden)."""
    if host.on:
        return f"API on port {host.port}, open to the network" if host.on_every_address else f"API on {host.host_port()}"
    if host.starting:
        return "API starting…"
    if host.failed:
        return "API server failed"
    return ""


class ServerWindow(QDialog):
    """Not modal: the chat goes on while it is open.

    Parts tests reach for: `switch` (on/off: the settings' server.enabled, as Settings' own switch), `state`,
    `address`, `copy_address`, `key`, `show_key`,
    `copy_key`, `new_key`, `warning` (shown while listening beyond this PC), `retry`,
    `requests` (newest first, at most KEPT_ROWS), `link` (Kestrel Link's sharing: link_section.py). Signal: settingsRequested (the
    Settings button: open Settings on the API server page).
    """

    settingsRequested = Signal()

    def __init__(self, adapter: "ServiceAdapter", settings: "SettingsDoor", api: "ApiAnswers", host: "ServerHost",
                 parent: QWidget | None = None, *, link_files: LinkFiles | None = None) -> None:
        super().__init__(parent)
        self._adapter = adapter
        self._settings = settings
        self._host = host
        self.setWindowTitle("API server")
        self.setModal(False)
        self.setWindowIcon(icons.icon("server"))
        self.state = QLabel(self)
        self.state.setObjectName("serverState")
        self.state.setWordWrap(True)
        self.state.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        bold = self.state.font()
        bold.setBold(True)
        self.state.setFont(bold)
        # The same switch as Settings → API server's: it saves server.enabled, and the host follows the settings.
        self.switch = QCheckBox("&Turn on the API server", self)
        self.switch.setObjectName("serverSwitch")
        self.switch.setToolTip("Turn the local API server on or off (as in Settings → API server)")
        self.switch.toggled.connect(self.turn)
        self.retry = QPushButton("Try a&gain", self)
        self.retry.clicked.connect(host.retry)
        self.settings_button = QPushButton("&Settings…", self)
        icons.themed(self.settings_button, "settings")
        self.settings_button.clicked.connect(self.settingsRequested)
        self.warning = WarningRow(LISTENING_BEYOND, self)
        self.address = self._field()
        self.copy_address = self._button("Cop&y", "copy", "Copy the address")
        self.copy_address.clicked.connect(lambda: self._copy(self.address.text(), self.copy_address))
        self.key = self._field()
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.show_key = self._button("S&how", "show", "Show the key")
        self.show_key.setCheckable(True)
        self.show_key.toggled.connect(self._show_key)
        self.copy_key = self._button("&Copy", "copy", "Copy the key")
        self.copy_key.clicked.connect(lambda: self._copy(settings.settings.server.key, self.copy_key))
        self.new_key = self._button("&New key…", "key", "Make a new key (the old one stops working)")
        self.new_key.clicked.connect(self.ask_for_new_key)
        self.requests = QTableWidget(0, len(COLUMNS), self)
        self.requests.setHorizontalHeaderLabels(COLUMNS)
        self.requests.verticalHeader().hide()
        self.requests.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.requests.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.requests.setWordWrap(False)
        header = self.requests.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        self._copied: dict[QPushButton, str] = {}
        self.link = LinkSection(adapter, settings, host, link_files or LinkFiles.at(data_paths()), self)
        self._lay_out()
        host.changed.connect(self.refresh)
        adapter.settingsChanged.connect(self.refresh)
        adapter.apiRequestLogged.connect(self.add_request)
        self.add_requests(api.recent)
        self.refresh()
        self.resize(860, 760)

    def _field(self) -> QLineEdit:
        field = QLineEdit(self)
        field.setReadOnly(True)
        return field

    def _button(self, text: str, icon: str, tip: str) -> QPushButton:
        button = QPushButton(text, self)
        button.setToolTip(tip)
        icons.themed(button, icon)
        return button

    def _lay_out(self) -> None:
        top = QHBoxLayout()
        top.addWidget(self.switch)
        top.addWidget(self.state, 1)
        top.addWidget(self.retry)
        top.addWidget(self.settings_button)
        address = QHBoxLayout()
        address.addWidget(self.address, 1)
        address.addWidget(self.copy_address)
        key = QHBoxLayout()
        key.addWidget(self.key, 1)
        for button in (self.show_key, self.copy_key, self.new_key):
            key.addWidget(button)
        form = QFormLayout()
        form.addRow("Address", address)
        form.addRow("Key", key)
        self.address_note = QLabel(self)
        self.address_note.setObjectName("serverNote")
        self.address_note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        form.addRow("", self.address_note)
        close = QPushButton("Close", self)
        close.setDefault(True)
        close.clicked.connect(self.close)
        close.setFocus()  # not Settings…, the first button, which would look like the default
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(close)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 16, 16, 12)
        layout.setSpacing(10)
        layout.addLayout(top)
        layout.addWidget(self.warning)
        layout.addLayout(form)
        layout.addWidget(self.link)
        layout.addSpacing(6)
        layout.addWidget(QLabel("Recent requests", self))
        layout.addWidget(self.requests, 1)
        layout.addLayout(buttons)

    def refresh(self) -> None:
        """Say the server's state, address and key as they are now."""
        host = self._host
        server = self._settings.settings.server
        self.state.setText(state_words(host))
        self.switch.blockSignals(True)  # showing the saved value is not a person's click
        self.switch.setChecked(server.enabled)
        self.switch.blockSignals(False)
        self.retry.setVisible(host.failed)
        self.warning.setVisible(host.listening_beyond)
        self.address.setText(host.client_address or "–")
        self.address.setCursorPosition(0)
        self.copy_address.setEnabled(bool(host.address))
        self.address_note.setText(address_words(host))
        self.key.setText(server.key or "made when the server first starts")
        self.key.setEchoMode(QLineEdit.EchoMode.Normal if self.show_key.isChecked() or not server.key
                             else QLineEdit.EchoMode.Password)
        self.key.setCursorPosition(0)  # the start of the key (or of its dots), not a cut end
        for button in (self.show_key, self.copy_key):
            button.setEnabled(bool(server.key))

    def turn(self, on: bool) -> None:
        """The switch was clicked: save server.enabled; the server follows the settings (a key is made first)."""
        door = self._settings
        if door.settings.server.enabled != on:
            server = dataclasses.replace(door.settings.server, enabled=on)
            self._adapter.spawn(door.update_settings(dataclasses.replace(door.settings, server=server)))

    def _show_key(self, shown: bool) -> None:
        self.show_key.setText("&Hide" if shown else "S&how")
        self.refresh()

    def add_requests(self, records: Iterable[RequestRecord]) -> None:
        for record in records:
            self.add_request(record)

    def add_request(self, record: object) -> None:
        """A finished request, at the top; the oldest goes beyond KEPT_ROWS."""
        assert isinstance(record, RequestRecord)
        self.requests.insertRow(0)
        for column, text in enumerate(request_cells(record)):
            item = QTableWidgetItem(text)
            if column in (4, 5, 6):
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.requests.setItem(0, column, item)
        while self.requests.rowCount() > KEPT_ROWS:
            self.requests.removeRow(self.requests.rowCount() - 1)

    def ask_for_new_key(self) -> None:
        answer = QMessageBox.question(self, "New key", NEW_KEY_QUESTION)
        if answer == QMessageBox.StandardButton.Yes:
            door = self._settings
            server = dataclasses.replace(door.settings.server, key=new_key())
            self._adapter.spawn(door.update_settings(dataclasses.replace(door.settings, server=server)))

    def _copy(self, text: str, button: QPushButton) -> None:
        QGuiApplication.clipboard().setText(text)
        if button not in self._copied:
            self._copied[button] = button.text()
        button.setText("Copied")
        QTimer.singleShot(1500, self, lambda: button.setText(self._copied[button]))
