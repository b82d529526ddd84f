"""Kestrel Link in the API server window: the sharing switch, the address, the certificate's fingerprint, a
pairing code, and the paired devices with Remove."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import time
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (QCheckBox, QFormLayout, QGroupBox, QHBoxLayout, QLabel, QLineEdit, QListWidget,
                               QListWidgetItem, QMessageBox, QPushButton, QVBoxLayout, QWidget)

from app.library.servers.link_code import shown_fingerprint
from app.server.link.devices import PairedDevice
from app.server.link.files import LinkFiles, shared_address
from app.server.link.pairing_codes import WaitingCode
from app.ui.common import icons

if TYPE_CHECKING:
    from app.service.doors.settings import SettingsDoor
    from app.ui.server.server_host import ServerHost
    from app.ui.state.adapter import ServiceAdapter

SHARE_OFF = "Off: nothing listens beyond this PC for sharing."
ADD_THERE = "On the other PC: Add a server… → Another Kestrel, with this address and the code."
NO_DEVICES = "No device is paired yet."
CODE_TICK_MS = 15_000  # the minutes left are said to the minute


def share_words(host: "ServerHost", sharing: bool) -> str:
    if host.sharing_on:
        return "On: your paired PCs can use your models."
    if host.sharing_error:
        return f"Could not share: {host.sharing_error}"
    if sharing or host.sharing_starting:
        return "Starting…"
    return SHARE_OFF


def code_words(code: WaitingCode | None, now: float, sharing: bool) -> str:
    if code is None:
        return "none yet: make one when the other PC is ready" if sharing else "none: turn sharing on first"
    minutes = max(1, round(code.seconds_left(now) / 60))
    return f"{code.text}   ({minutes} min left, used once)"


def device_words(device: PairedDevice) -> str:
    paired = datetime.datetime.fromtimestamp(device.paired).astimezone()
    return f"{device.name}   ·   paired {paired:%Y-%m-%d %H:%M}"


class LinkSection(QGroupBox):
    """Parts tests reach for: `switch` (saves server.share), `state`, `address`, `fingerprint`, `code`,
    `new_code`, `devices` (one item per paired device, its name as Qt.UserRole), `remove`. Files are read and
    written off the UI thread; `refreshed` is how a test waits for a read."""

    def __init__(self, adapter: "ServiceAdapter", settings: "SettingsDoor", host: "ServerHost", files: LinkFiles,
                 parent: QWidget | None = None) -> None:
        super().__init__("Share models with other computers (Kestrel Link)", parent)
        self._adapter, self._settings, self._host, self._files = adapter, settings, host, files
        self._code: WaitingCode | None = None
        self._code_wanted = False  # the person turned sharing on here: a code once it is on
        self._has_certificate = False
        self.reads = 0  # finished reads of the files, for tests
        self.switch = QCheckBox("Share &models with other computers", self)
        self.switch.setObjectName("shareSwitch")
        self.switch.setToolTip("Serve your models over TLS on this PC's network address, to paired PCs only")
        self.switch.toggled.connect(self.turn)
        self.state = QLabel(self)
        self.state.setWordWrap(True)
        self.address = self._field()
        self.fingerprint = self._field()
        self.fingerprint.setText("reading…")  # until the files are read, off the UI thread
        self.code = self._field()
        self.code.setObjectName("pairingCode")
        self._plain = self.code.font()
        self._bigger = self.code.font()  # a code is read aloud or typed from here: shown large
        self._bigger.setPointSizeF(self._bigger.pointSizeF() * 1.15)
        self._bigger.setBold(True)
        self.new_code = QPushButton("New &pairing code", self)
        icons.themed(self.new_code, "key")
        self.new_code.clicked.connect(self.make_code)
        self.note = QLabel(ADD_THERE, self)
        self.devices = QListWidget(self)
        self.devices.setMaximumHeight(self.devices.fontMetrics().height() * 5 + 8)
        self.devices.itemSelectionChanged.connect(self._selected)
        self._show_note("reading…")
        self.remove = QPushButton("&Remove…", self)
        self.remove.setToolTip("Unpair the chosen device: its key is refused from its next request on")
        self.remove.setEnabled(False)
        self.remove.clicked.connect(self.ask_to_remove)
        self._lay_out()
        self._ticker = QTimer(self)
        self._ticker.setInterval(CODE_TICK_MS)
        self._ticker.timeout.connect(self._say_code)
        self._ticker.start()
        host.changed.connect(self.refresh)
        adapter.settingsChanged.connect(self.refresh)
        self.refresh()
        self.reload()

    def _field(self) -> QLineEdit:
        field = QLineEdit(self)
        field.setReadOnly(True)
        return field

    def _lay_out(self) -> None:
        top = QHBoxLayout()
        top.addWidget(self.switch)
        top.addWidget(self.state, 1)
        code = QHBoxLayout()
        code.addWidget(self.code, 1)
        code.addWidget(self.new_code)
        devices = QHBoxLayout()
        devices.addWidget(self.devices, 1)
        devices.addWidget(self.remove, 0, Qt.AlignmentFlag.AlignTop)
        form = QFormLayout()
        form.addRow("Address", self.address)
        form.addRow("Certificate", self.fingerprint)
        form.addRow("Pairing code", code)
        form.addRow("", self.note)
        form.addRow("Paired devices", devices)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addLayout(form)

    def refresh(self) -> None:
        """Say the switch, the state and the address as they are now."""
        host, server = self._host, self._settings.settings.server
        self.switch.blockSignals(True)  # showing the saved value is not a person's click
        self.switch.setChecked(server.share)
        self.switch.blockSignals(False)
        self.state.setText(share_words(host, server.share))
        # Not looked up while off (lan_address asks the system for a route): said in words instead.
        waiting = (shared_address(server.share_host, server.share_port) if server.share_host
                   else f"this PC's network address, port {server.share_port}, once sharing is on")
        self.address.setText(host.shared_address or waiting)
        self.address.setCursorPosition(0)
        self.new_code.setEnabled(server.share)
        self._say_code()
        if host.sharing_on and self._code_wanted:
            self._code_wanted = False
            self.make_code()  # once the server made its certificate, which the code binds
        elif host.sharing_on and not self._has_certificate:
            self.reload()  # the certificate was made as sharing started

    def turn(self, on: bool) -> None:
        """The switch was clicked: save server.share; the host starts or stops the sharing server."""
        door = self._settings
        if door.settings.server.share != on:
            server = dataclasses.replace(door.settings.server, share=on)
            self._adapter.spawn(door.update_settings(dataclasses.replace(door.settings, server=server)))
        self._code_wanted = on
        if not on:
            self._adapter.spawn(self._cancel_code())

    def reload(self) -> None:
        """Read the certificate, the waiting code and the devices again, off the UI thread."""
        self._adapter.spawn(self._read())

    async def _read(self) -> None:
        files = self._files
        certificate, code, devices = await asyncio.to_thread(
            lambda: (files.known_certificate(), files.codes.waiting(), files.devices.list()))
        self._has_certificate = certificate is not None
        self.fingerprint.setText(shown_fingerprint(certificate.fingerprint) if certificate else
                                 "made when sharing first starts")
        self.fingerprint.setCursorPosition(0)
        self._code = code
        self._say_code()
        self._show_devices(devices)
        self.reads += 1

    def make_code(self) -> None:
        self._adapter.spawn(self._make_code())

    async def _make_code(self) -> None:
        try:
            await asyncio.to_thread(self._files.new_code)
        except OSError as exc:
            self.code.setText(f"Kestrel could not keep a code ({exc.strerror or exc}).")
            return
        await self._read()

    async def _cancel_code(self) -> None:
        await asyncio.to_thread(self._files.codes.cancel)
        await self._read()

    def _say_code(self) -> None:
        code = self._code if self._code is not None and self._code.seconds_left(time.time()) > 0 else None
        self.code.setFont(self._bigger if code is not None else self._plain)
        self.code.setText(code_words(code, time.time(), self._settings.settings.server.share))
        self.code.setCursorPosition(0)

    def _show_devices(self, devices: tuple[PairedDevice, ...]) -> None:
        self.devices.clear()
        for device in devices:
            item = QListWidgetItem(device_words(device))
            item.setData(Qt.ItemDataRole.UserRole, device.name)
            self.devices.addItem(item)
        if not devices:
            self._show_note(NO_DEVICES)
        self._selected()

    def _show_note(self, words: str) -> None:
        """A line in the devices' list that is no device: it cannot be chosen."""
        note = QListWidgetItem(words)
        note.setFlags(Qt.ItemFlag.NoItemFlags)
        self.devices.addItem(note)

    def _selected(self) -> None:
        item = self.devices.currentItem()
        self.remove.setEnabled(item is not None and item.data(Qt.ItemDataRole.UserRole) is not None
                               and item.isSelected())

    def ask_to_remove(self) -> None:
        item = self.devices.currentItem()
        name = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        if not isinstance(name, str):
            return
        answer = QMessageBox.question(self, "Remove device", f"Unpair {name}? It can no longer use your models "
                                                             "until it pairs again with a new code.")
        if answer == QMessageBox.StandardButton.Yes:
            self.remove_device(name)

    def remove_device(self, name: str) -> None:
        async def removing() -> None:
            await asyncio.to_thread(self._files.devices.revoke, name)
            await self._read()

        self._adapter.spawn(removing())
