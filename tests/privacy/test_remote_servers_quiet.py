"""Remote servers keep the promise: a server is contacted only when the person added it, and only that server.

Seen by the kernel (strace -f over the whole process tree, the engine included): with a server added,
listing and removing servers open no socket, and a chat with its model connects to its address alone.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from app.library.servers.records import ServerKind
from tests.helpers.hostile_server import Script, hostile_server
from tests.helpers.remote_answers import add_server
from tests.helpers.syscalls import run_traced
from tests.privacy.test_no_network import ROOT, app_env

_CONNECT = re.compile(r"connect\(\d+, \{sa_family=AF_INET6?, sin6?_port=htons\((\d+)\), (?:sin_addr=inet_addr|inet_pton)"
                      r"\(\"?([^\")]+)")


def test_listing_and_removing_servers_opens_no_socket(tmp_path: Path, kestrel_home: Path) -> None:
    add_server("studio-pc", "http://192.0.2.7:11434", ServerKind.OLLAMA, key="sk-secret")  # TEST-NET: nothing there
    for args in (["servers", "list", "--json"], ["servers", "remove", "studio-pc"]):
        traced = run_traced([sys.executable, "-m", "app", *args], tmp_path, env=app_env(kestrel_home), cwd=ROOT)
        assert traced.returncode == 0, traced.stderr
        assert traced.network == [], args


def test_a_chat_with_a_remote_model_connects_to_its_server_and_nowhere_else(tmp_path: Path,
                                                                           kestrel_home: Path) -> None:
    script = Script(words=["Hello", " there"])
    with hostile_server(script) as url:
        add_server("far", url, ServerKind.OPENAI)
        traced = run_traced([sys.executable, "-m", "app", "chat", "--model", "far/m", "Hi"], tmp_path,
                            env=app_env(kestrel_home), cwd=ROOT)
    assert traced.returncode == 0, traced.stderr
    assert traced.stdout.strip() == "Hello there"
    port = url.rsplit(":", 1)[1]
    connections = [line for line in traced.network if "connect(" in line]
    assert connections, traced.network
    for line in connections:
        match = _CONNECT.search(line)
        assert match is not None and match.groups() == (port, "127.0.0.1"), line
    assert script.requests == ["GET /v1/models", "POST /v1/chat/completions"]
