"""The window's real API server on 127.0.0.1: it answers while the window goes on, and stops with it."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
import urllib.error
import urllib.request

import pytest

from tests.helpers.scripted_engine import ScriptedEngine
from tests.ui.conftest import run, until


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get(url: str, key: str | None) -> tuple[int, dict]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


@pytest.fixture
def window(make_window, loop):
    made = make_window(engine=ScriptedEngine())
    yield made
    run(loop, made.server.stop())


def test_turned_on_in_the_window_it_answers_on_loopback_and_stops_when_turned_off(window, loop) -> None:
    port = free_port()
    c = window.controller
    run(loop, c.update_settings(dataclasses.replace(c.settings, server=dataclasses.replace(
        c.settings.server, enabled=True, port=port))))
    run(loop, until(lambda: window.server.on, what="the server to listen"))
    assert window.status.server.text() == f"API on 127.0.0.1:{port}"
    key = c.settings.server.key
    # The client runs on a thread: the window's loop (this one) is the server's, and keeps serving.
    status, body = run(loop, asyncio.to_thread(get, f"http://127.0.0.1:{port}/v1/models", key))
    assert status == 200 and body["object"] == "list"
    status, _ = run(loop, asyncio.to_thread(get, f"http://127.0.0.1:{port}/v1/models", "kestrel-wrong"))
    assert status == 401
    run(loop, c.update_settings(dataclasses.replace(c.settings, server=dataclasses.replace(
        c.settings.server, enabled=False))))
    run(loop, window.server.follow())  # in line behind the one the change started: done when it is
    assert not window.server.on
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0  # nothing listens any more
