"""The Settings dialog's "API server" page: on/off, port, who may reach it, and how it serves."""

from __future__ import annotations

import dataclasses
import re

from PySide6.QtWidgets import (QCheckBox, QFormLayout, QLabel, QPlainTextEdit, QSizePolicy, QSpinBox,
                               QVBoxLayout, QWidget)

from app.core.server_settings import LOOPBACK, ServerSettings, is_loopback
from app.ui.common.warning_row import WarningRow

ALL_ADDRESSES = "0.0.0.0"
BEYOND_WARNING = ("Other devices on your network can reach your models through this PC's address, with the key. "
                  "Turn this on only on a network you trust.")


def parse_origins(text: str) -> tuple[str, ...]:
    """Origins typed one per line or separated by commas (or spaces); blanks dropped, repeats once."""
    found = [part.strip().rstrip("/") for part in re.split(r"[,\s]+", text)]
    return tuple(dict.fromkeys(part for part in found if part))


def _number(parent: QWidget, low: int, high: int, value: int) -> QSpinBox:
    """A spin box as wide as its numbers (a port stretched across the dialog reads as a text field)."""
    box = QSpinBox(parent)
    box.setRange(low, high)
    box.setValue(value)
    box.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
    return box


class ServerSettingsPage(QWidget):
    """The server's settings as controls; `value()` gives them back validated."""

    def __init__(self, settings: ServerSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._settings = settings
        self.enabled = self._box("&Turn on the API server", settings.enabled,
                                 "Programs on this PC (editors, scripts, agents) use Kestrel's models through "
                                 "the OpenAI and Anthropic APIs. Off, Kestrel opens no network port.")
        self.port = _number(self, 1, 65535, settings.port)
        self.beyond = self._box("Allow other de&vices on the network", settings.listen_beyond_this_pc,
                                "Listen on every network address of this PC, not only on 127.0.0.1.")
        self.beyond_warning = WarningRow(BEYOND_WARNING, self)
        self.keyless = self._box("Requests from this &PC need no key", settings.keyless_loopback,
                                 "Programs on this PC may leave the key out; other devices always need it.")
        self.origins = QPlainTextEdit("\n".join(settings.cors_origins), self)
        self.origins.setPlaceholderText("None: no web page may call the server.\nFor example: http://localhost:3000")
        self.origins.setTabChangesFocus(True)
        self.origins.setFixedHeight(self.origins.fontMetrics().lineSpacing() * 3 + 14)
        self.origins.setToolTip("Web pages from these origins may call the server from a browser (CORS). "
                                "One per line, or separated by commas.")
        self.only_loaded = self._box("Only the &loaded model", settings.only_loaded_model,
                                     "A request for another model gets an error instead of loading it.")
        self.max_waiting = _number(self, 0, 1000, settings.max_waiting)
        self.max_waiting.setToolTip("Requests that may wait for the model while it answers another; more get "
                                    "“503 busy, retry later”.")
        self.keep_as_chats = self._box("&Keep API conversations as chats", settings.keep_as_chats,
                                       "Save what programs ask and what the model answers in the chat list. "
                                       "Off, API requests and answers are never written to the history.")
        self.tray = self._box("Keep serving in the tra&y when the window closes", settings.tray_on_close,
                              "Closing the window leaves Kestrel in the system tray, serving; "
                              "Quit from the tray's menu (or File → Quit) ends it.")
        self._lay_out()
        self.beyond.toggled.connect(self.beyond_warning.setVisible)
        self.beyond_warning.setVisible(settings.listen_beyond_this_pc)

    def _box(self, text: str, checked: bool, tip: str) -> QCheckBox:
        box = QCheckBox(text, self)
        box.setChecked(checked)
        box.setToolTip(tip)
        return box

    def _lay_out(self) -> None:
        intro = QLabel("Other programs use your models through the OpenAI and Anthropic APIs, at the address and "
                       "with the key shown in View → API server. To use them from your other computers, turn on “Share "
                       "models with other computers” (Kestrel Link) there.", self)
        intro.setWordWrap(True)
        form = QFormLayout()
        form.addRow("", self.enabled)
        form.addRow("P&ort", self.port)
        form.addRow("", self.beyond)
        form.addRow("", self.beyond_warning)
        form.addRow("", self.keyless)
        origins_label = QLabel("Allowed &web origins", self)
        origins_label.setBuddy(self.origins)
        form.addRow(origins_label, self.origins)
        form.addRow("", self.only_loaded)
        form.addRow("Requests that may w&ait", self.max_waiting)
        form.addRow("", self.keep_as_chats)
        form.addRow("", self.tray)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addLayout(form)
        layout.addStretch(1)

    def value(self) -> ServerSettings:
        """The settings as the controls say, over the ones given (the key is kept)."""
        beyond = self.beyond.isChecked()
        host = self._settings.host
        if beyond and is_loopback(host):
            host = ALL_ADDRESSES
        elif not beyond and not is_loopback(host):
            host = LOOPBACK
        return dataclasses.replace(
            self._settings, enabled=self.enabled.isChecked(), port=self.port.value(), host=host,
            listen_beyond_this_pc=beyond, keyless_loopback=self.keyless.isChecked(),
            cors_origins=parse_origins(self.origins.toPlainText()), only_loaded_model=self.only_loaded.isChecked(),
            max_waiting=self.max_waiting.value(), keep_as_chats=self.keep_as_chats.isChecked(),
            tray_on_close=self.tray.isChecked()).validated()
