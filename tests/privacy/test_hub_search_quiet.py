"""The Hugging Face search box sends nothing until the user types in it: opening "Get a model"
and its search tab, and leaving the box empty, connects nowhere and looks no name up; typing a
query sends exactly one request, to the hub HF_ENDPOINT names (127.0.0.1 here).

Watched with Python's audit hooks (socket.connect, socket.getaddrinfo) in the window's own
process, where the search runs; tests/privacy/test_no_network.py watches the whole process
tree with strace for what Kestrel does on its own.
"""

from __future__ import annotations

import socket
import sys
import threading

import pytest

from app.ui.models.hub_search import PAUSE_MS
from tests.helpers.http_servers import TestServer
from tests.helpers.hub_answers import search_path, serve_search
from tests.ui.conftest import loop, make_window, run, until

__all__ = ["loop", "make_window"]  # the window's fixtures, shared with tests/ui

_lock = threading.Lock()
_seen: list[tuple[str, object]] = []


def _hook(event: str, args: tuple[object, ...]) -> None:
    if event == "socket.getaddrinfo":
        with _lock:
            _seen.append((event, args[0]))
    elif event == "socket.connect":
        sock, address = args[0], args[1]
        if isinstance(sock, socket.socket) and sock.family in (socket.AF_INET, socket.AF_INET6):
            with _lock:
                _seen.append((event, address))


sys.addaudithook(_hook)  # a hook cannot be removed: it only records, and only network sockets


def seen() -> list[tuple[str, object]]:
    with _lock:
        return list(_seen)


def test_the_hook_sees_a_connection() -> None:
    before = len(seen())
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass
    assert ("socket.connect", ("127.0.0.1", port)) in seen()[before:]


def test_an_empty_search_box_sends_nothing_and_a_query_sends_one_request(
        make_window, loop, qtbot, server: TestServer, monkeypatch: pytest.MonkeyPatch) -> None:
    serve_search(server, "thinker")
    monkeypatch.setenv("HF_ENDPOINT", server.base)
    window = make_window()
    window.show_model_manager()
    manager = window.model_manager
    assert manager is not None
    before = len(seen())

    manager.tabs.setCurrentWidget(manager.catalog)
    manager.catalog.side_tabs.setCurrentWidget(manager.catalog.hub_search)
    box = manager.catalog.hub_search
    box.query.setFocus()
    qtbot.wait(PAUSE_MS * 3)

    assert seen()[before:] == [] and server.log == [], "the open, empty box asked nothing"

    qtbot.keyClicks(box.query, "thinker")
    qtbot.wait(PAUSE_MS + 100)
    run(loop, until(lambda: box.repos.topLevelItemCount() == 3, what="the results"))

    port = int(server.base.rsplit(":", 1)[1])
    assert [(e.method, e.path) for e in server.log] == [("GET", search_path("thinker"))]
    connects = [address for event, address in seen()[before:] if event == "socket.connect"]
    assert connects == [("127.0.0.1", port)], seen()[before:]
