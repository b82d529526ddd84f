"""servers.json: added, listed, removed and overridden; names and addresses checked in words; a damaged or newer file handled."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from app.library.servers.records import (ModelAbility, ModelOverride, RemoteModel, ServerKind, parse_address,
                                         remote_address, split_model_id)
from app.library.servers.server_list import SERVERS_VERSION, ServerList, ServerListError


def test_a_server_added_is_listed_again_from_the_file_with_its_kind_and_normalized_address(tmp_path: Path) -> None:
    servers = ServerList(tmp_path / "servers.json")
    added = servers.add("studio-pc", "192.168.1.20:11434/", ServerKind.OLLAMA)
    assert added.url == "http://192.168.1.20:11434" and added.host == "192.168.1.20:11434"
    again = ServerList(tmp_path / "servers.json")
    assert again.list() == (added,) and again.get("STUDIO-PC") == added
    data = json.loads((tmp_path / "servers.json").read_text(encoding="utf-8"))
    assert data["version"] == SERVERS_VERSION and data["servers"][0]["kind"] == "ollama"
    assert not list(tmp_path.glob(".servers.json.*.tmp"))  # written whole, no temporary left


def test_each_kind_has_its_endpoints_under_the_right_root(tmp_path: Path) -> None:
    servers = ServerList(tmp_path / "servers.json")
    lm = servers.add("lm", "http://127.0.0.1:1234/v1", ServerKind.OPENAI)
    bare = servers.add("bare", "http://127.0.0.1:8080", ServerKind.OPENAI)
    ollama = servers.add("ol", "http://127.0.0.1:11434/api", ServerKind.OLLAMA)
    assert lm.api_url("/models") == "http://127.0.0.1:1234/v1/models"
    assert bare.api_url("/chat/completions") == "http://127.0.0.1:8080/v1/chat/completions"
    assert ollama.api_url("/api/tags") == "http://127.0.0.1:11434/api/tags"


@pytest.mark.parametrize(("name", "url", "words"), [
    ("a/b", "http://x", "cannot name a server"),
    ("", "http://x", "cannot name a server"),
    ("ok", "ftp://x", "is not a server address"),
    ("ok", "http://user:secret@x", "Leave the user name and password out"),
    ("ok", "http://x:99999", "port that is not a number"),
])
def test_a_bad_name_or_address_is_refused_in_words_and_nothing_is_written(tmp_path: Path, name: str, url: str,
                                                                          words: str) -> None:
    servers = ServerList(tmp_path / "servers.json")
    with pytest.raises(ValueError, match=words):
        servers.add(name, url, ServerKind.OPENAI)
    assert not (tmp_path / "servers.json").exists()


def test_a_name_is_taken_once_whatever_its_letter_case_and_removing_forgets_it(tmp_path: Path) -> None:
    servers = ServerList(tmp_path / "servers.json")
    servers.add("Studio", "http://a", ServerKind.OPENAI)
    with pytest.raises(ValueError, match="added already"):
        servers.add("studio", "http://b", ServerKind.OPENAI)
    assert servers.remove("STUDIO") is not None and servers.list() == ()
    assert servers.remove("studio") is None


def test_overrides_are_kept_per_model_and_win_over_what_the_server_says(tmp_path: Path) -> None:
    servers = ServerList(tmp_path / "servers.json")
    servers.add("s", "http://a", ServerKind.OPENAI)
    override = ModelOverride(32768, frozenset({ModelAbility.TOOLS}))
    kept = servers.set_override("s", "llama3", override)
    assert ServerList(tmp_path / "servers.json").get("s") == kept and kept.overrides["llama3"] == override
    said = RemoteModel("s", "llama3", 8192)
    assert said.with_override(override) == RemoteModel("s", "llama3", 32768, frozenset({ModelAbility.TOOLS}), True)
    cleared = servers.set_override("s", "llama3", ModelOverride())
    assert "llama3" not in cleared.overrides
    with pytest.raises(LookupError):
        servers.set_override("nobody", "m", override)


def test_a_damaged_file_lists_nothing_says_so_and_is_set_aside_by_the_next_change(tmp_path: Path) -> None:
    path = tmp_path / "servers.json"
    path.write_text("{not json", encoding="utf-8")
    servers = ServerList(path)
    assert servers.list() == () and servers.last_problem is not None and "damaged" in servers.last_problem
    servers.add("s", "http://a", ServerKind.OPENAI)
    assert [s.name for s in servers.list()] == ["s"]
    assert len(list(tmp_path.glob("servers.json.bad-*"))) == 1


def test_a_file_from_a_newer_kestrel_is_read_but_never_written_over(tmp_path: Path) -> None:
    path = tmp_path / "servers.json"
    newer = {"version": SERVERS_VERSION + 1, "servers": [{"name": "s", "kind": "openai", "url": "http://a",
                                                         "future": True}]}
    path.write_text(json.dumps(newer), encoding="utf-8")
    servers = ServerList(path)
    assert [s.name for s in servers.list()] == ["s"]
    with pytest.raises(ServerListError, match="newer version of Kestrel"):
        servers.add("t", "http://b", ServerKind.OPENAI)
    assert json.loads(path.read_text(encoding="utf-8")) == newer


def test_an_entry_that_is_no_server_is_left_out_and_said(tmp_path: Path) -> None:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"version": 1, "servers": [{"name": "ok", "kind": "ollama", "url": "http://a"},
                                                          {"name": "bad", "kind": "carrier-pigeon", "url": "x"}]}))
    servers = ServerList(path)
    assert [s.name for s in servers.list()] == ["ok"]
    assert servers.last_problem == f"1 server(s) in {path} could not be read and are not listed."


def test_two_writers_at_once_lose_no_server(tmp_path: Path) -> None:
    path = tmp_path / "servers.json"

    def add(prefix: str) -> None:
        for number in range(10):
            ServerList(path).add(f"{prefix}{number}", "http://a", ServerKind.OPENAI)

    threads = [threading.Thread(target=add, args=(prefix,)) for prefix in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(ServerList(path).list()) == 20


def test_addresses_and_ids_name_the_server_and_the_model_whatever_they_hold() -> None:
    address = remote_address("studio pc", "/models/tiny model.gguf")
    assert address.startswith("remote://studio%20pc/") and parse_address(address) == ("studio pc",
                                                                                      "/models/tiny model.gguf")
    assert parse_address("remote://onlyserver") is None and parse_address("/a/b.gguf") is None
    assert split_model_id("studio-pc/hf.co/org/repo:Q4_K_M") == ("studio-pc", "hf.co/org/repo:Q4_K_M")
    assert split_model_id("just-a-name") is None and split_model_id("/abs/path.gguf") is None
