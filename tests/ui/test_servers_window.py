"""The window's side of remote servers: "Add a server…" checked, added, found and refused in words, the models listed
beside the local ones and used for a chat, all against real servers on 127.0.0.1; nothing contacted until pressed."""

from __future__ import annotations

import socket
import sys
import threading

import pytest
import shiboken6
from PySide6.QtWidgets import QMessageBox

from app.core.paths import data_paths
from app.library.servers.finding import UsualPort
from app.library.servers.records import ServerKind
from app.ui.models.server_dialog import AddServerDialog
from app.ui.models.server_models import NONE_ADDED, ServerModelsPanel
from tests.helpers.hostile_server import Script, hostile_server
from tests.helpers.remote_peers import closed_port
from tests.ui.conftest import idle, run, service_of, until

_lock = threading.Lock()
_connects: list[tuple[str, int]] = []


def _hook(event: str, args: tuple[object, ...]) -> None:
    if event == "socket.connect":
        sock, address = args[0], args[1]
        if isinstance(sock, socket.socket) and sock.family in (socket.AF_INET, socket.AF_INET6):
            with _lock:
                _connects.append(address)  # type: ignore[arg-type]


sys.addaudithook(_hook)  # cannot be removed: it only records, and only network sockets


def connects() -> list[tuple[str, int]]:
    with _lock:
        return list(_connects)


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def open_panel(window) -> ServerModelsPanel:
    window.show_model_manager()
    panel = window.model_manager.installed.servers_panel
    assert panel is not None
    return panel


def closed(dialog: AddServerDialog) -> bool:
    """Gone: it deletes itself once closed."""
    return not shiboken6.isValid(dialog) or not dialog.isVisible()


def fill(dialog: AddServerDialog, name: str, url: str, kind: ServerKind, key: str = "") -> None:
    dialog.name.setText(name)
    dialog.url.setText(url)
    dialog.set_kind(kind)
    dialog.key.setText(key)


def test_a_server_is_checked_added_listed_and_answers_a_chat_contacting_it_only_when_pressed(
        make_window, loop, qtbot) -> None:
    script = Script(models=["m"], ollama=True, words=["Hello", " from", " afar"])
    with hostile_server(script) as url:
        window = make_window()
        before = len(connects())
        panel = open_panel(window)
        run(loop, until(lambda: panel.listing is not None and panel.listing.done(), what="the list read"))
        assert panel.tree.isHidden() and panel.words.text() == NONE_ADDED
        dialog = panel.open_add_dialog()
        fill(dialog, "studio-pc", url, ServerKind.OLLAMA, "sk-secret")
        qtbot.wait(50)
        assert connects()[before:] == [] and script.requests == []  # typing contacts nothing

        dialog.check_button.click()
        run(loop, until(lambda: "answered" in dialog.note.text(), what="the check"))
        assert dialog.note.text() == "studio-pc answered: 1 model (m). Press Add to add it."
        assert script.requests and script.keys[-1] == "Bearer sk-secret"
        assert run(loop, window.doors.servers.servers()) == ()  # a check keeps nothing

        dialog.add_button.click()
        run(loop, until(lambda: closed(dialog), what="the dialog closing"))
        run(loop, until(lambda: [m.id for m in panel.models_of("studio-pc")] == ["studio-pc/m"], what="the models"))
        assert panel.words.text().startswith("Added studio-pc. studio-pc answered: 1 model (m).")
        assert "The key is kept in" in panel.words.text() and "sk-secret" not in panel.words.text()
        assert "sk-secret" not in (data_paths().config / "servers.json").read_text()
        assert {address[1] for address in connects()[before:]} == {port_of(url)}

        panel.select_model("studio-pc/m")
        assert panel.use_button.isEnabled()
        panel.use_button.click()
        host = url.removeprefix("http://")
        run(loop, until(lambda: window.doors.model.loaded is not None
                        and window.doors.model.loaded.device == f"studio-pc ({host})", what="the remote model"))
        run(loop, until(lambda: window.status.device.text() == f"studio-pc ({host})", what="the status line"))
        assert window.composer.edit.placeholderText() == f"Answers come from studio-pc ({url})"
        assert f"go to studio-pc ({url})" in window.chat.messages.empty_words  # never "nothing leaves it"
        assert window.doors.chat.send("Hi")
        run(loop, until(idle(window), what="the answer"))
        assert window.doors.chat.messages[-1].text == "Hello from afar"
        assert {address[1] for address in connects()[before:]} == {port_of(url)}

        [local] = window.adapter.installed.rows()
        assert run(loop, window.doors.library.load(local.model.id))
        run(loop, until(lambda: window.composer.edit.placeholderText() == "Message Kestrel", what="this PC again"))
        assert "nothing you type leaves it" in window.chat.messages.empty_words


def test_a_server_that_is_off_keeps_the_form_and_is_added_anyway_then_removed(make_window, loop, qtbot,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    window = make_window()
    panel = open_panel(window)
    dialog = panel.open_add_dialog()
    url = f"http://127.0.0.1:{closed_port()}"
    fill(dialog, "off-box", url, ServerKind.OPENAI, "sk-kept")
    dialog.add_button.click()
    # The note comes from the check itself, the button's words from its task's end (a later turn of the loop).
    run(loop, until(lambda: "did not answer" in dialog.note.text() and dialog.add_button.text() == "&Add anyway",
                    what="the fault, and Add anyway"))
    assert dialog.note.text().startswith(f"off-box ({url}) did not answer")
    assert dialog.isVisible() and dialog.name.text() == "off-box" and dialog.key.text() == "sk-kept"
    assert dialog.add_button.text() == "&Add anyway"
    dialog.add_button.click()
    run(loop, until(lambda: closed(dialog), what="added anyway"))
    run(loop, until(lambda: panel.server_item("off-box") is not None and panel.listing is not None
                    and panel.listing.done(), what="the list"))
    top = panel.server_item("off-box")
    assert top is not None and top.child(0).text(0).startswith("did not answer")
    panel.tree.setCurrentItem(top)
    assert panel.words.text().startswith(f"off-box ({url}) did not answer")
    assert panel.remove_button.isEnabled() and not panel.use_button.isEnabled()

    monkeypatch.setattr(QMessageBox, "question", lambda *args: QMessageBox.StandardButton.Yes)
    panel.remove_selected()
    run(loop, until(lambda: panel.tree.isHidden(), what="the server removed"))
    assert run(loop, window.doors.servers.servers()) == ()


def test_a_wrong_key_a_bad_address_and_the_anthropic_kind_are_said_in_the_dialog(make_window, loop) -> None:
    window = make_window()
    dialog = open_panel(window).open_add_dialog()
    with hostile_server(Script(list_status=401)) as url:
        fill(dialog, "locked", url, ServerKind.OPENAI, "sk-wrong")
        dialog.check_button.click()
        run(loop, until(lambda: "key" in dialog.note.text(), what="the key refused"))
        assert dialog.note.text().startswith(f"locked ({url}) refused the key Kestrel sent (HTTP 401).")
    fill(dialog, "bad", "ftp://somewhere", ServerKind.OPENAI)
    dialog.check_button.click()
    run(loop, until(lambda: "is not a server address" in dialog.note.text(), what="the address refused"))
    assert dialog.add_button.text() == "&Add"  # a typing mistake is not added anyway
    dialog.set_kind(ServerKind.KESTREL)
    assert dialog.key_hint.text().endswith("Another Kestrel's key is in its View → API server… window.")
    fill(dialog, "claude-box", "http://127.0.0.1:9", ServerKind.ANTHROPIC)
    assert dialog.chosen_kind() == ServerKind.ANTHROPIC  # offered now: Kestrel chats with them
    assert dialog.kind.currentText() == "Anthropic-compatible (its Messages API)"
    assert dialog.check_button.isEnabled() and dialog.add_button.isEnabled()


def test_find_servers_on_this_pc_looks_only_when_pressed_and_fills_the_form(make_window, loop, qtbot) -> None:
    window = make_window()
    servers = service_of(window).servers
    with hostile_server(Script(ollama=True)) as url:
        servers.usual_ports = (UsualPort(closed_port(), ServerKind.OPENAI, "LM Studio", "/models"),
                               UsualPort(port_of(url), ServerKind.OLLAMA, "Ollama", "/api/version"))
        before = len(connects())
        dialog = open_panel(window).open_add_dialog()
        qtbot.wait(50)
        assert connects()[before:] == []
        dialog.find_button.click()
        run(loop, until(lambda: dialog.note.text().startswith("Found"), what="the search"))
    assert dialog.note.text() == f"Found Ollama at {url}. Press Add to add it."
    assert (dialog.name.text(), dialog.url.text(), dialog.chosen_kind()) == ("ollama", url, ServerKind.OLLAMA)
    servers.usual_ports = (UsualPort(closed_port(), ServerKind.OLLAMA, "Ollama", "/api/version"),)
    dialog.find_button.click()
    run(loop, until(lambda: dialog.note.text().startswith("Nothing answered"), what="nothing found"))
    assert dialog.url.text() == url  # what was filled stays



def test_foundry_local_found_where_its_status_says_is_added_with_one_press_of_add(make_window, loop) -> None:
    """Its status as a Windows user recorded it (tests/fixtures/foundry_local/), its port moved to a loopback
    OpenAI-compatible server's; untested against Foundry Local itself."""
    from app.library.servers.finding import AskedWhere
    from app.library.servers.foundry_local import foundry_local_url
    from tests.library.test_foundry_local import as_if_running_on, older_cli

    window = make_window()
    servers = service_of(window).servers
    with hostile_server(Script(models=["phi-4-mini-instruct-vitis-npu:2"])) as url:
        servers.usual_ports = ()
        servers.asked_where = (AskedWhere(ServerKind.OPENAI, "Foundry Local", "/models",
                                          lambda: foundry_local_url("win32", older_cli(as_if_running_on(url)))),)
        dialog = open_panel(window).open_add_dialog()
        dialog.find_button.click()
        run(loop, until(lambda: dialog.note.text().startswith("Found"), what="the search"))
        assert dialog.note.text() == f"Found Foundry Local at {url}. Press Add to add it."
        assert (dialog.name.text(), dialog.chosen_kind()) == ("foundry-local", ServerKind.OPENAI)
        dialog.add_button.click()
        run(loop, until(lambda: closed(dialog), what="the server added"))
    [added] = run(loop, window.doors.servers.servers())
    assert (added.name, added.url, added.kind) == ("foundry-local", url, ServerKind.OPENAI)

def test_cancel_during_a_check_adds_nothing(make_window, loop, qtbot) -> None:
    window = make_window()
    dialog = AddServerDialog(window.doors.servers, window.adapter.spawn, window)  # kept after closing
    qtbot.addWidget(dialog)
    dialog.show()
    script = Script(delay_s=0.0)
    with hostile_server(script) as url:
        fill(dialog, "slowpoke", url, ServerKind.OPENAI, "sk-x")
        dialog.add_button.click()
        assert dialog.busy and not dialog.add_button.isEnabled()
        dialog.cancel_button.click()
        qtbot.wait(300)
    assert run(loop, window.doors.servers.servers()) == () and dialog.result() == 0
    assert dialog.key.text() == ""
