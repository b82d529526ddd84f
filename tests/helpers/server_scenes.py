"""Remote servers as a person sees them, for the clip test and screenshots: "Add a server" and the manager's servers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from typing import Any

from PySide6.QtWidgets import QWidget

from app.library.servers.faults import ServerFacts, ServerTrouble, fault_words
from app.library.servers.finding import FoundServer
from app.library.servers.records import ModelAbility, ModelOverride, RemoteModel, ServerKind
from tests.helpers.hostile_server import Script, hostile_server
from tests.helpers.remote_peers import closed_port

# Model names as Ollama lists them: long tags, an embedding model.
MODELS = ["llama3.1:8b-instruct-q4_K_M", "qwen2.5-coder:32b-instruct-q5_K_M", "nomic-embed-text:latest"]
_RUNNING = ExitStack()  # the peer lives as long as the probe: each scene opens twice (light, dark)
_PEER: list[str] = []

Wait = Callable[[Awaitable[Any]], Any]


def add_server_dialog(window: Any) -> QWidget:
    """Three servers found on this PC (Foundry Local's the longest line), an Anthropic-compatible server typed
    with its key, and its refusal of the key said."""
    from app.ui.models.server_dialog import AddServerDialog

    dialog = AddServerDialog(window.doors.servers, window.adapter.spawn, window)
    dialog.found = [FoundServer("ollama", "http://127.0.0.1:11434", ServerKind.OLLAMA, "Ollama"),
                    FoundServer("lm-studio", "http://127.0.0.1:1234", ServerKind.OPENAI, "LM Studio"),
                    FoundServer("foundry-local", "http://127.0.0.1:55064", ServerKind.OPENAI, "Foundry Local")]
    for server in dialog.found:
        dialog.found_choice.addItem(f"{server.program} at {server.url}")
    dialog.found_choice.setCurrentIndex(2)
    dialog.found_choice.show()
    dialog.name.setText("studio-pc")
    dialog.url.setText("http://192.168.1.20:8080")
    dialog.set_kind(ServerKind.ANTHROPIC)
    dialog.key.setText("sk-ant-not-shown")
    dialog.note.setText(fault_words(ServerFacts("studio-pc", "http://192.168.1.20:8080", ServerTrouble.KEY, 401,
                                                key_sent=True)))
    return dialog


def manager_with_servers(window: Any, wait: Wait) -> QWidget:
    """The model manager with a real Ollama-shaped peer on 127.0.0.1 listing three models (one's context and
    abilities set by hand) and a server that is off, chosen so its words show."""
    from app.ui.models.model_manager import ModelManager

    doors = window.doors
    if not _PEER:
        _PEER.append(_RUNNING.enter_context(hostile_server(Script(models=list(MODELS), ollama=True))))
        wait(doors.servers.add("studio-pc", _PEER[0], ServerKind.OLLAMA))
        wait(doors.servers.add("old laptop", f"http://127.0.0.1:{closed_port()}", ServerKind.OPENAI))
        wait(doors.servers.set_override("studio-pc", MODELS[1], ModelOverride(
            16384, frozenset({ModelAbility.TOOLS, ModelAbility.VISION}))))  # set by hand: marked in its row
    shown = ModelManager(window.adapter, doors.library, doors.settings, window, model=doors.model,
                         servers=doors.servers)
    shown.show()
    panel = shown.installed.servers_panel
    assert panel is not None
    wait(_until(lambda: panel.listing is not None and panel.listing.done()))
    top = panel.server_item("old laptop")
    if top is not None:
        panel.tree.setCurrentItem(top)
    return shown


async def _until(ready: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not ready() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


def remote_model_settings(window: Any, *, said: bool) -> QWidget:
    """A server model's Settings…: an Ollama model whose server said its context and tools, set by hand to a shorter
    context and vision (said), or an OpenAI-compatible one whose server says nothing (not said)."""
    from app.ui.models.remote_model_dialog import RemoteModelDialog

    if said:
        model = RemoteModel("studio-pc", MODELS[1], 32768, frozenset({ModelAbility.TOOLS}), True).with_override(
            ModelOverride(16384, frozenset({ModelAbility.TOOLS, ModelAbility.VISION})))
    else:
        model = RemoteModel("old laptop", "llama-3.2-3b-instruct")
    return RemoteModelDialog(window.doors.servers, window.adapter.spawn, model, window)


def add_another_kestrel(window: Any) -> QWidget:
    """Add a server as another Kestrel (Kestrel Link): its https address, a pairing code, and a refusal said."""
    from app.ui.models.server_dialog import AddServerDialog

    dialog = AddServerDialog(window.doors.servers, window.adapter.spawn, window)
    dialog.set_kind(ServerKind.KESTREL)
    dialog.name.setText("studio-pc")
    dialog.url.setText("https://192.168.1.20:8766")
    dialog.code.setText("7KQM-2XVD-9T4H")
    dialog.note.setText("studio-pc refused to pair: That pairing code has expired (a code lasts 10 minutes). Make a "
                        "new one on the sharing PC, then type it here.")
    return dialog


def sharing_window(window: Any, wait: Wait) -> QWidget:
    """View → API server… with Kestrel Link on: a real TLS sharing server on 127.0.0.1, its pairing code, the
    certificate's fingerprint and two paired devices."""
    import dataclasses

    from app.core.paths import data_paths
    from app.server.link.files import LinkFiles
    from app.ui.server.server_window import ServerWindow
    from tests.helpers.remote_peers import free_port

    doors = window.doors
    files = LinkFiles.at(data_paths())
    if not files.devices.list():
        files.devices.add("laptop")
        files.devices.add("Ana's tablet")
        settings = doors.settings.settings
        wait(doors.settings.update_settings(dataclasses.replace(settings, server=dataclasses.replace(
            settings.server, share=True, share_host="127.0.0.1", share_port=free_port()))))
        wait(window.server.follow())
        files.new_code()
    shown = ServerWindow(window.adapter, doors.settings, doors.api, window.server, window)
    shown.show()
    wait(_until(lambda: shown.link.reads > 0 and window.server.sharing_on, 20))
    return shown

