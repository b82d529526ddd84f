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
from app.library.servers.records import ServerKind
from tests.helpers.hostile_server import Script, hostile_server
from tests.helpers.remote_peers import closed_port

# Model names as Ollama lists them: long tags, an embedding model.
MODELS = ["llama3.1:8b-instruct-q4_K_M", "qwen2.5-coder:32b-instruct-q5_K_M", "nomic-embed-text:latest"]
_RUNNING = ExitStack()  # the peer lives as long as the probe: each scene opens twice (light, dark)
_PEER: list[str] = []

Wait = Callable[[Awaitable[Any]], Any]


def add_server_dialog(window: Any) -> QWidget:
    """The form filled from two servers found on this PC, the key typed, and a server's fault said."""
    from app.ui.models.server_dialog import AddServerDialog

    dialog = AddServerDialog(window.doors.servers, window.adapter.spawn, window)
    dialog.found = [FoundServer("ollama", "http://127.0.0.1:11434", ServerKind.OLLAMA, "Ollama"),
                    FoundServer("lm-studio", "http://127.0.0.1:1234", ServerKind.OPENAI, "LM Studio")]
    for server in dialog.found:
        dialog.found_choice.addItem(f"{server.program} at {server.url}")
    dialog.found_choice.show()
    dialog.name.setText("studio-pc")
    dialog.url.setText("http://192.168.1.20:11434")
    dialog.set_kind(ServerKind.OLLAMA)
    dialog.key.setText("sk-not-shown")
    dialog.note.setText(fault_words(ServerFacts("studio-pc", "http://192.168.1.20:11434", ServerTrouble.DOWN,
                                                detail="Connection refused")))
    return dialog


def manager_with_servers(window: Any, wait: Wait) -> QWidget:
    """The model manager with a real Ollama-shaped peer on 127.0.0.1 listing three models and a server that is
    off, chosen so its words show."""
    from app.ui.models.model_manager import ModelManager

    doors = window.doors
    if not _PEER:
        _PEER.append(_RUNNING.enter_context(hostile_server(Script(models=list(MODELS), ollama=True))))
        wait(doors.servers.add("studio-pc", _PEER[0], ServerKind.OLLAMA))
        wait(doors.servers.add("old laptop", f"http://127.0.0.1:{closed_port()}", ServerKind.OPENAI))
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
