"""Issue 35, the API server's door (items 3 and 10): key-less mode answers this PC's own programs,
not any web page (DNS rebinding, cross-site posts), and connections that never finish a request
cannot use up the server's files. Malformed bodies, words and stop_sequence are in
test_api_door_bodies.py.

Real sockets on 127.0.0.1 (raw http.client where a header must be wrong on purpose); the answers
come from FakeAnswers, the real service on the scripted engine, or `kestrel serve` on the tiny model.
"""

from __future__ import annotations

import asyncio
import json
import resource
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.core.server_settings import ServerSettings
from app.server import connections
from tests.helpers.scripted_answers import Script
from tests.helpers.scripted_engine import ScriptedEngine
from tests.redteam.api_requests import (CHAT, HELLO, JSON, MESSAGES, answered_within, anthropic_error, free_port,
                                        head_only, openai_error, port_of, raw)
from tests.server.helpers import KEY, FakeAnswers, anthropic_client, api_over, loop_thread, openai_client, \
    real_service, serving
from tests.server.serve_process import ROOT, interrupt, read_ready, serve_command, serve_env
from tests.service.conftest import install

KEYLESS = ServerSettings(port=0, keyless_loopback=True)
# A request's start that never ends (no blank line after the headers).
HALF_A_HEAD = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n"


# --- item 3: key-less mode is for this PC's own programs, not for any web page ----------------

FOREIGN_HOSTS = ["evil.example", "evil.example:{port}", "rebind.attacker.test:{port}", "127.0.0.1.nip.io:{port}",
                 "localhost.evil.example:{port}", "10.0.0.5:{port}", ""]
LOOPBACK_HOSTS = ["localhost", "localhost:{port}", "LocalHost:{port}", "127.0.0.1", "127.0.0.1:{port}", "[::1]",
                  "[::1]:{port}"]


def test_keyless_mode_refuses_a_host_that_is_not_this_pc() -> None:
    """DNS rebinding: a page whose own name resolves to 127.0.0.1 sends its name as Host."""
    fake = FakeAnswers()
    with loop_thread() as thread, serving(thread, fake, KEYLESS) as server:
        port = port_of(server.address)
        for host in (h.format(port=port) for h in FOREIGN_HOSTS):
            status, body, _ = raw(server.address, "GET", "/v1/models", {"Host": host})
            assert status == 403, (host, body)
            message = openai_error(body)["message"]
            assert f"Host {host!r}" in message and "localhost" in message and "API key" in message, message
            status, body, _ = raw(server.address, "POST", "/v1/messages", {"Host": host, **JSON}, MESSAGES)
            assert status == 403, (host, body)
            assert anthropic_error(body)["type"] == "permission_error"
    assert fake.asks == []


def test_keyless_mode_answers_this_pcs_own_names() -> None:
    with loop_thread() as thread, serving(thread, FakeAnswers(), KEYLESS) as server:
        port = port_of(server.address)
        for host in (h.format(port=port) for h in LOOPBACK_HOSTS):
            status, body, _ = raw(server.address, "GET", "/v1/models", {"Host": host})
            assert status == 200, (host, body)
        # The official clients send the address they were given as Host, and JSON bodies.
        answer = openai_client(server.address, "no-key").chat.completions.create(model="tiny", messages=HELLO)
        assert answer.choices[0].message.content == "Hello there."
        message = anthropic_client(server.address, "no-key").messages.create(model="tiny", max_tokens=8,
                                                                            messages=HELLO)
        assert message.content[0].type == "text"


def test_keyless_mode_refuses_a_cross_site_text_plain_post() -> None:
    """The issue's case: a page posts JSON as text/plain (no CORS preflight) from its own origin."""
    fake = FakeAnswers()
    with loop_thread() as thread, serving(thread, fake, KEYLESS) as server:
        status, body, _ = raw(server.address, "POST", "/v1/chat/completions",
                              {"Content-Type": "text/plain;charset=UTF-8", "Origin": "http://evil.example"}, CHAT)
        assert status == 403, body
        message = openai_error(body)["message"]
        assert "'http://evil.example'" in message and "cors_origins" in message, message
        assert fake.asks == []
        # Without an Origin (a form, a sandboxed page's fetch): the body must still say it is JSON.
        for kind in ("text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                     "multipart/form-data; boundary=x", None):
            headers = {"Content-Type": kind} if kind is not None else {}
            status, body, _ = raw(server.address, "POST", "/v1/chat/completions", headers, CHAT)
            assert status == 415, (kind, body)
            message = openai_error(body)["message"]
            assert "Content-Type: application/json" in message and (kind or "no Content-Type") in message, message
            status, body, _ = raw(server.address, "POST", "/v1/messages", headers, MESSAGES)
            assert status == 415 and anthropic_error(body)["type"] == "invalid_request_error", body
        assert fake.asks == []
        for kind in ("application/json", "application/json; charset=utf-8", "Application/JSON"):
            status, body, _ = raw(server.address, "POST", "/v1/chat/completions", {"Content-Type": kind}, CHAT)
            assert status == 200, (kind, body)


def test_keyless_mode_refuses_an_origin_not_in_the_cors_list() -> None:
    fake = FakeAnswers()
    with loop_thread() as thread:
        with serving(thread, fake, KEYLESS) as server:
            for origin in ("http://evil.example", "null", "http://localhost:3000"):
                status, body, _ = raw(server.address, "POST", "/v1/chat/completions", {"Origin": origin, **JSON}, CHAT)
                assert status == 403 and f"{origin!r}" in openai_error(body)["message"], (origin, body)
                status, body, _ = raw(server.address, "GET", "/v1/models", {"Origin": origin})
                assert status == 403, (origin, body)
            assert fake.asks == []
        listed = ServerSettings(port=0, keyless_loopback=True, cors_origins=("http://localhost:3000",))
        with serving(thread, fake, listed) as server:
            status, body, reply = raw(server.address, "POST", "/v1/chat/completions",
                                      {"Origin": "http://localhost:3000", **JSON}, CHAT)
            assert status == 200, body
            assert reply.getheader("access-control-allow-origin") == "http://localhost:3000"
            status, body, reply = raw(server.address, "POST", "/v1/chat/completions",
                                      {"Origin": "http://evil.example", **JSON}, CHAT)
            assert status == 403 and reply.getheader("access-control-allow-origin") is None, body
    assert len(fake.asks) == 1


def test_a_cross_site_post_writes_no_chat_into_the_history(tiny_model: Path) -> None:
    """With keep_as_chats on, the page's post would have become a chat of the user's."""
    engine = ScriptedEngine()
    engine.default_script = Script(text=("Hi",), endless=False)
    settings = ServerSettings(keyless_loopback=True, keep_as_chats=True)
    with loop_thread() as thread, real_service(thread, tiny_model, engine, settings) as service, \
            api_over(thread, service) as server:
        planted = json.dumps({"model": service.session.model.id, "messages": [{"role": "user", "content": "planted"}]})
        for headers in ({"Content-Type": "text/plain", "Origin": "http://evil.example"},
                        {"Content-Type": "text/plain"}, {"Host": "evil.example", **JSON}):
            status, body, _ = raw(server.address, "POST", "/v1/chat/completions", headers, planted.encode())
            assert status in (403, 415), (headers, body)
        status, body, _ = raw(server.address, "POST", "/v1/chat/completions", JSON,
                              json.dumps({"model": service.session.model.id, "messages": HELLO}).encode())
        assert status == 200, body
        chats = thread.call(_chats_once_kept(service))
    assert [chat.title for chat in chats] == ["API: Hello"]


async def _chats_once_kept(service: Any) -> list[Any]:
    async with asyncio.timeout(20):
        while not await service.conversations.listing():
            await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)  # a planted chat would have been written by now too
    return list(await service.conversations.listing())


def test_with_the_key_a_client_needs_no_json_header_origin_or_local_host() -> None:
    """Decided: the key is the door; Host, Origin and Content-Type are checked only without it. A
    page cannot send the key cross-site without a preflight, which CORS already refuses, and
    `curl -d` (a form's content type) or a proxy's Host keep working as they did."""
    fake = FakeAnswers()
    auth = {"Authorization": f"Bearer {KEY}"}
    with loop_thread() as thread:
        for settings in (ServerSettings(port=0, key=KEY), ServerSettings(port=0, key=KEY, keyless_loopback=True)):
            with serving(thread, fake, settings) as server:
                status, body, _ = raw(server.address, "POST", "/v1/chat/completions",
                                      {**auth, "Content-Type": "application/x-www-form-urlencoded",
                                       "Host": "kestrel.lan:8765", "Origin": "http://tool.example"}, CHAT)
                assert status == 200, body
    assert len(fake.asks) == 2


# --- item 10: a connection that never finishes its head is closed ------------------------------

def test_a_connection_that_never_finishes_its_head_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connections, "HEAD_LIMIT_S", 1.0)  # 10 s in use: the serve tests below wait it out
    with loop_thread() as thread, serving(thread, FakeAnswers()) as server:
        port = port_of(server.address)
        silent, partial = head_only(port, b""), head_only(port, HALF_A_HEAD)
        answered = head_only(port, b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
                                   + KEY.encode() + b"\r\n\r\n")
        try:
            assert answered.recv(20).startswith(b"HTTP/1.1 200 ")
            for held in (silent, partial, answered):  # the answered one, once its keep-alive is over
                held.settimeout(60)  # far longer than the limits: it only bounds a failure
                while held.recv(65536):
                    pass
            status, _, _ = raw(server.address, "GET", "/v1/models", {"Authorization": f"Bearer {KEY}"})
            assert status == 200
        finally:
            for held in (silent, partial, answered):
                held.close()


def _low_file_limit() -> None:
    """In the serve child, before exec: macOS's default of 256 open files."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))


@pytest.mark.slow
def test_300_half_open_connections_under_256_files_pass_and_the_log_stays_small(tiny_model: Path,
                                                                                 kestrel_home: Path) -> None:
    """The issue's case, on `kestrel serve`: it answered no one again, and logged 72 MB in 18 s."""
    install(tiny_model)
    process = subprocess.Popen(serve_command("--port", str(free_port())), cwd=ROOT, env=serve_env(kestrel_home),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_low_file_limit)
    held: list[socket.socket] = []
    answered_after = None
    try:
        ready = read_ready(process)
        held = [head_only(port_of(ready.address), HALF_A_HEAD) for _ in range(300)]
        answered_after = answered_within(ready.address, 120, ready.key)  # the held ones still open
    finally:
        for sock in held:
            sock.close()
        _, err = interrupt(process)
    assert answered_after is not None, err[-3000:]
    assert process.returncode == 0, err[-3000:]
    assert len(err) < 20_000 and err.count("Too many open files") <= 1 and "Traceback" not in err, err[-3000:]


@pytest.mark.slow
def test_a_server_out_of_files_says_so_once_and_serves_again(kestrel_home: Path) -> None:
    """Accepts that fail for want of files (the rest of the process used them up): said once, with
    no traceback each, and the server answers again once the held connections are closed."""
    process = subprocess.Popen([sys.executable, "-m", "tests.redteam.files_used_up_server", "8"], cwd=ROOT,
                               env=serve_env(kestrel_home), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    held: list[socket.socket] = []
    answered_after = None
    try:
        assert process.stdout is not None
        address = process.stdout.readline().strip()
        assert address.startswith("http://127.0.0.1:"), address
        held = [head_only(port_of(address), HALF_A_HEAD) for _ in range(12)]
        answered_after = answered_within(address, 90)
    finally:
        for sock in held:
            sock.close()
        _, err = process.communicate("", timeout=60)
    assert answered_after is not None, err[-3000:]
    assert err.count("run out of open files") == 1 and "Traceback" not in err and len(err) < 2000, err[-3000:]
