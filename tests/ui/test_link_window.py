"""Kestrel Link in the real window: the API server window's switch starts a real sharing server with TLS on
127.0.0.1, shows a pairing code and the certificate's fingerprint, a real client pairs with it, and the window
lists the device and removes it."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from pathlib import Path

import pytest
import shiboken6
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from app.core.paths import DataPaths, data_paths
from app.library.servers.book import ServerBook
from app.library.servers.faults import ServerFault, ServerTrouble
from app.library.servers.link_code import shown_fingerprint
from app.library.servers.records import ServerKind
from app.server.link.files import LinkFiles
from app.ui.models.server_dialog import AddServerDialog
from app.ui.models.server_models import ServerModelsPanel
from app.ui.server.server_window import ServerWindow
from tests.helpers.link_peers import sharing_peer
from tests.helpers.scripted_engine import ScriptedEngine
from tests.ui.conftest import run, until
from tests.ui.test_server_live import free_port


def open_panel(window) -> ServerModelsPanel:
    window.show_model_manager()
    panel = window.model_manager.installed.servers_panel
    assert panel is not None
    return panel


def closed(dialog: AddServerDialog) -> bool:
    return not shiboken6.isValid(dialog) or not dialog.isVisible()


@pytest.fixture
def window(make_window, loop):
    made = make_window(engine=ScriptedEngine())
    yield made
    run(loop, made.server.stop())


def client_book(tmp_path: Path) -> ServerBook:
    """The other PC's servers and keys, in a folder of its own."""
    paths = DataPaths(tmp_path / "other" / "data", tmp_path / "other" / "config", tmp_path / "other" / "cache",
                      tmp_path / "other" / "logs").ensure()
    return ServerBook.at(paths)


def test_the_switch_shares_over_tls_a_pc_pairs_and_removing_it_locks_it_out(window, loop, qtbot, tmp_path,
                                                                            monkeypatch) -> None:
    port = free_port()
    doors = window.doors
    # The LAN address injected: loopback here, where TLS works all the same.
    run(loop, doors.settings.update_settings(dataclasses.replace(doors.settings.settings, server=dataclasses.replace(
        doors.settings.settings.server, share_host="127.0.0.1", share_port=port))))
    shown = ServerWindow(window.adapter, doors.settings, doors.api, window.server, window)
    qtbot.addWidget(shown)
    link = shown.link
    assert link.state.text() == "Off: nothing listens beyond this PC for sharing."
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0  # off: nothing listens
    link.switch.click()
    run(loop, until(lambda: window.server.sharing_on, what="sharing to start"))
    assert doors.settings.settings.server.share
    assert link.address.text() == f"https://127.0.0.1:{port}"
    run(loop, until(lambda: "min left" in link.code.text(), what="a pairing code"))
    files = LinkFiles.at(data_paths())
    certificate = files.known_certificate()
    assert certificate is not None and link.fingerprint.text() == shown_fingerprint(certificate.fingerprint)
    code = link.code.text().split(" ")[0]

    other = client_book(tmp_path)
    added = run(loop, asyncio.to_thread(other.pair, "studio-pc", link.address.text(), code, device="laptop"))
    assert added.server.pin == certificate.fingerprint
    link.reload()
    run(loop, until(lambda: link.devices.count() == 1 and link.devices.item(0).data(Qt.ItemDataRole.UserRole)
                    == "laptop", what="the device listed"))
    assert [m.name for m in run(loop, asyncio.to_thread(other.models, "studio-pc"))] == ["tiny-model"]

    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    link.devices.setCurrentRow(0)
    assert link.remove.isEnabled()
    link.remove.click()
    run(loop, until(lambda: link.devices.item(0).text() == "No device is paired yet.", what="the device removed"))
    with pytest.raises(ServerFault) as refused:
        run(loop, asyncio.to_thread(other.models, "studio-pc"))
    assert refused.value.facts.trouble is ServerTrouble.KEY

    link.switch.click()
    run(loop, until(lambda: not window.server.sharing_on and not doors.settings.settings.server.share,
                    what="sharing to stop"))
    run(loop, window.server.follow())
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0  # off again: nothing listens
    assert link.state.text() == "Off: nothing listens beyond this PC for sharing."


@pytest.mark.slow
def test_add_a_server_pairs_with_another_kestrel_by_its_code(make_window, loop, tmp_path, tiny_model) -> None:
    window = make_window()
    with sharing_peer(tmp_path / "studio", tiny_model) as peer:
        dialog = open_panel(window).open_add_dialog()
        dialog.set_kind(ServerKind.KESTREL)
        assert dialog.code.isVisible() and dialog.code_hint.isVisible()
        dialog.name.setText("studio-pc")
        dialog.url.setText(peer.shared)
        typo = ("1" if peer.code[0] != "1" else "2") + peer.code[1:]
        dialog.code.setText(typo)
        assert dialog.add_button.text() == "&Pair and add" and not dialog.check_button.isEnabled()
        assert not dialog.key.isEnabled()
        dialog.add_button.click()
        run(loop, until(lambda: "does not match the certificate" in dialog.note.text(), what="the typo refused"))
        assert dialog.note.text().startswith(f"The pairing code does not match the certificate at {peer.shared}, so "
                                             "the code was not sent.")
        dialog.code.setText(peer.code.lower())
        dialog.add_button.click()
        run(loop, until(lambda: closed(dialog), what="paired and added"))
    server = ServerBook.at(data_paths()).get("studio-pc")
    assert server is not None and server.kind is ServerKind.KESTREL and server.pin == peer.fingerprint
    assert ServerBook.at(data_paths()).keys.get("studio-pc").startswith("kestrel-link-")  # type: ignore[union-attr]
