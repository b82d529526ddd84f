"""The window's real API server on 127.0.0.1: it answers while the window goes on, and stops with it."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
import urllib.error
import urllib.request

import pytest

from app.service.api.api_answers import SERVING
from tests.helpers.scripted_engine import ScriptedEngine
from tests.ui.conftest import idle, run, until


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
    doors = window.doors
    run(loop, doors.settings.update_settings(dataclasses.replace(doors.settings.settings, server=dataclasses.replace(
        doors.settings.settings.server, enabled=True, port=port))))
    run(loop, until(lambda: window.server.on, what="the server to listen"))
    assert window.status.server.text() == f"API on 127.0.0.1:{port}"
    key = doors.settings.settings.server.key
    # The client runs on a thread: the window's loop (this one) is the server's, and keeps serving.
    status, body = run(loop, asyncio.to_thread(get, f"http://127.0.0.1:{port}/v1/models", key))
    assert status == 200 and body["object"] == "list"
    status, _ = run(loop, asyncio.to_thread(get, f"http://127.0.0.1:{port}/v1/models", "kestrel-wrong"))
    assert status == 401
    run(loop, doors.settings.update_settings(dataclasses.replace(doors.settings.settings, server=dataclasses.replace(
        doors.settings.settings.server, enabled=False))))
    run(loop, window.server.follow())  # in line behind the one the change started: done when it is
    assert not window.server.on
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0  # nothing listens any more


def test_an_api_answer_shows_in_the_status_line_and_the_windows_chat_waits_its_turn_beside_it(make_window, loop) -> None:
    from openai import OpenAI

    window = make_window(engine=ScriptedEngine(token_s=0.04))
    try:
        port = free_port()
        doors = window.doors
        run(loop, doors.settings.update_settings(dataclasses.replace(doors.settings.settings,
                                                                     server=dataclasses.replace(
            doors.settings.settings.server, enabled=True, port=port))))
        run(loop, window.server.follow())
        client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=doors.settings.settings.server.key,
                        max_retries=0)
        model = doors.settings.settings.default_model
        asked = asyncio.ensure_future(asyncio.to_thread(
            client.chat.completions.create, model=model, max_tokens=40,
            messages=[{"role": "user", "content": "Name three birds of prey."}]), loop=loop)
        serving = lambda: window.status.activity_text() == SERVING  # noqa: E731
        run(loop, until(lambda: serving() or asked.done(), 30, "the status line to say an API request is served"))
        if asked.done():
            asked.result()  # a refused request says why here
        assert serving()  # about 1.6 s of answer left: the window's chat is sent while it runs
        assert doors.chat.send("And the window's own chat?")  # taken: it waits in the engine's line
        answer = run(loop, asked)
        assert answer.choices[0].message.content and answer.usage.completion_tokens > 0
        run(loop, until(idle(window), 60, "the window's chat to be answered"))
        last = window.adapter.messages.messages()[-1]
        assert last.role.value == "assistant" and last.text
        window.show_server_window()
        table = window.server_window.requests
        assert table.rowCount() == 1
        assert [table.item(0, n).text() for n in (2, 3, 6)] == ["/v1/chat/completions", model, "200"]
        assert table.item(0, 4).text() == f"{answer.usage.prompt_tokens} in, {answer.usage.completion_tokens} out"
    finally:
        run(loop, window.server.stop())
