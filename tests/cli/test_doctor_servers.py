"""`kestrel doctor` lists the servers the person added (name, kind, address, whether a key is kept) and contacts
them only with --check-servers: a real process, against a real server on 127.0.0.1 and a port nothing listens on."""

from __future__ import annotations

import json
import subprocess
import sys

from app.library.servers.records import ServerKind
from tests.hardware.test_doctor import _RUN_DOCTOR, ROOT
from tests.helpers.hostile_server import Script, hostile_server
from tests.helpers.remote_answers import add_server
from tests.helpers.remote_peers import closed_port


def doctor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _RUN_DOCTOR, "doctor", *args], cwd=ROOT, capture_output=True,
                          text=True, encoding="utf-8", timeout=120)


def test_no_server_added_is_said_and_nothing_is_contacted() -> None:
    result = doctor()
    assert result.returncode == 0, result.stderr
    assert "Servers you added: none. Nothing is contacted." in result.stdout
    assert json.loads(doctor("--json").stdout)["servers"] == []


def test_servers_are_listed_without_contact_and_asked_only_with_check_servers() -> None:
    script = Script(models=["qwen2.5:7b", "llama3.1:8b"], ollama=True)
    off = f"http://127.0.0.1:{closed_port()}"
    with hostile_server(script) as url:
        add_server("studio-pc", url, ServerKind.OLLAMA, key="sk-very-secret")
        add_server("old laptop", off, ServerKind.OPENAI)

        table = doctor()
        listed = json.loads(doctor("--json").stdout)["servers"]
        assert script.requests == []  # the privacy rule: no contact unless asked

        checked = doctor("--check-servers")
        checked_json = json.loads(doctor("--json", "--check-servers").stdout)["servers"]
    assert table.returncode == 0 and checked.returncode == 0, table.stderr + checked.stderr
    assert f"  studio-pc · ollama · {url} · key kept · not contacted" in table.stdout
    assert f"  old laptop · openai · {off} · no key · not contacted" in table.stdout
    assert "--check-servers asks each" in table.stdout
    assert listed == [
        {"name": "studio-pc", "kind": "ollama", "url": url, "key_kept": True, "reachable": None, "said": ""},
        {"name": "old laptop", "kind": "openai", "url": off, "key_kept": False, "reachable": None, "said": ""}]

    assert script.keys and set(script.keys) == {"Bearer sk-very-secret"}
    assert f"  studio-pc · ollama · {url} · key kept · answers, lists 2 models" in checked.stdout
    assert f"  old laptop · openai · {off} · no key · old laptop ({off}) did not answer" in checked.stdout
    assert [(s["name"], s["reachable"]) for s in checked_json] == [("studio-pc", True), ("old laptop", False)]
    for output in (table.stdout, checked.stdout, json.dumps(listed), json.dumps(checked_json)):
        assert "sk-very-secret" not in output
