"""The Settings dialog's API server page: every control round-trips into ServerSettings, and says what it must."""

from __future__ import annotations

import dataclasses

from PySide6.QtWidgets import QAbstractButton, QLabel, QWidget

from app.core.server_settings import LOOPBACK, ServerSettings
from app.core.settings import Settings
from app.ui.settings.dialogs import SettingsDialog
from app.ui.settings.server_settings_page import ALL_ADDRESSES, ServerSettingsPage, parse_origins


def clipped(root: QWidget) -> list[str]:
    """The visible labels and buttons under root narrower than their text needs (cut off on screen)."""
    found = []
    for widget in root.findChildren(QWidget):
        if not widget.isVisibleTo(root) or not isinstance(widget, (QLabel, QAbstractButton)):
            continue
        if isinstance(widget, QLabel) and (widget.wordWrap() or not widget.text()):
            continue
        if widget.width() < widget.minimumSizeHint().width():
            found.append(f"{type(widget).__name__} {getattr(widget, 'text', lambda: '')()!r}: "
                         f"{widget.width()} < {widget.minimumSizeHint().width()}")
    return found


def test_the_server_page_round_trips_every_setting(qtbot) -> None:
    server = ServerSettings(enabled=True, port=9001, key="kestrel-abc", keyless_loopback=True,
                            cors_origins=("http://localhost:3000", "https://app.example"), only_loaded_model=True,
                            max_waiting=7, keep_as_chats=True, tray_on_close=True)
    dialog = SettingsDialog(Settings(server=server), None)
    qtbot.addWidget(dialog)
    page = dialog.server
    assert (page.enabled.isChecked(), page.port.value(), page.keyless.isChecked(), page.only_loaded.isChecked(),
            page.max_waiting.value(), page.keep_as_chats.isChecked(), page.tray.isChecked()) == (
                True, 9001, True, True, 7, True, True)
    assert page.origins.toPlainText() == "http://localhost:3000\nhttps://app.example"
    assert dialog.value() == Settings(server=server)  # unchanged controls give back the same settings
    page.enabled.setChecked(False)
    page.port.setValue(8080)
    page.keyless.setChecked(False)
    page.origins.setPlainText("http://a.test, http://b.test/\nhttp://a.test")
    page.only_loaded.setChecked(False)
    page.max_waiting.setValue(0)
    page.keep_as_chats.setChecked(False)
    page.tray.setChecked(False)
    changed = dialog.value().server
    assert changed == dataclasses.replace(server, enabled=False, port=8080, keyless_loopback=False,
                                          cors_origins=("http://a.test", "http://b.test"), only_loaded_model=False,
                                          max_waiting=0, keep_as_chats=False, tray_on_close=False)
    assert changed.key == "kestrel-abc"  # the page never touches the key


def test_other_devices_listen_on_every_address_with_a_warning_and_back_on_loopback(qtbot) -> None:
    page = ServerSettingsPage(ServerSettings())
    qtbot.addWidget(page)
    page.show()
    assert not page.beyond_warning.isVisible()
    page.beyond.setChecked(True)
    assert page.beyond_warning.isVisible()
    assert "Other devices on your network can reach your models" in page.beyond_warning.text.text()
    assert (page.value().host, page.value().listen_beyond_this_pc) == (ALL_ADDRESSES, True)
    page.beyond.setChecked(False)
    assert not page.beyond_warning.isVisible()
    assert (page.value().host, page.value().listen_beyond_this_pc) == (LOOPBACK, False)
    chosen = ServerSettingsPage(ServerSettings(host="192.168.1.20", listen_beyond_this_pc=True))
    qtbot.addWidget(chosen)
    assert chosen.value().host == "192.168.1.20"  # a host chosen in the file is kept while allowed


def test_origins_are_read_from_lines_commas_and_spaces() -> None:
    assert parse_origins("") == ()
    assert parse_origins(" http://x.test ,\n\nhttp://y.test/  http://x.test") == ("http://x.test", "http://y.test")


def test_nothing_on_the_page_is_cut_off(qtbot) -> None:
    dialog = SettingsDialog(Settings(server=ServerSettings(listen_beyond_this_pc=True, host=ALL_ADDRESSES)), None)
    qtbot.addWidget(dialog)
    dialog.tabs.setCurrentWidget(dialog.server)
    dialog.show()
    qtbot.waitExposed(dialog)
    assert dialog.server.beyond_warning.isVisible()
    assert clipped(dialog.server) == []
