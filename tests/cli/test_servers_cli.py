"""`kestrel servers` and `kestrel chat --model SERVER/MODEL` as a person runs them: against a server on 127.0.0.1,
in plain words with their exit statuses, never a traceback. The servers commands run in this process (main());
the chats as real processes, through the window's chat door and the real engine."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from app.__main__ import main
from app.core.paths import data_paths
from app.library.servers.book import ServerBook
from app.library.servers.finding import UsualPort, find_on_this_pc
from app.library.servers.records import ServerKind, remote_address
from app.service.models.client import EngineClient
from tests.cli.test_chat_cli import assert_no_traceback, json_lines, kestrel
from tests.helpers.hostile_server import Script, hostile_server
from tests.helpers.remote_answers import stream, with_engine
from tests.helpers.remote_peers import closed_port, free_port
from tests.server.serve_process import ROOT, interrupt, read_ready, serve_command, serve_env


def servers(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    """`kestrel servers ARGS` in this process, its output captured as a subprocess's would be."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _stdin(stdin):
        try:
            status = main(["servers", *args])
        except SystemExit as exit:  # argparse's own usage errors
            status = int(exit.code or 0)
    result = subprocess.CompletedProcess(args, status, out.getvalue(), err.getvalue())
    assert_no_traceback(result)
    return result


@contextlib.contextmanager
def _stdin(text: str) -> Iterator[None]:
    before, sys.stdin = sys.stdin, io.StringIO(text)
    try:
        yield
    finally:
        sys.stdin = before


def test_add_checks_the_server_answers_and_list_and_remove_read_only_the_files() -> None:
    script = Script(models=["llama3.1:8b", "qwen3:4b"], ollama=True)
    with hostile_server(script) as url:
        added = servers("add", "studio-pc", url, "--kind", "ollama", "--key-stdin", stdin="sk-secret\n")
        assert added.returncode == 0, added.stderr
        assert added.stdout.splitlines()[0] == f"Added studio-pc: an Ollama server at {url}."
        assert "The key is kept in" in added.stdout and "It answers with 2 model(s): llama3.1:8b, qwen3:4b." \
            in added.stdout
        assert script.keys[0] == "Bearer sk-secret"
        seen = len(script.requests)
        listed = servers("list", "--json")
        assert json_lines(listed.stdout) == [{"name": "studio-pc", "kind": "ollama", "url": url, "key": True,
                                              "wait_s": 120.0}]
        removed = servers("remove", "studio-pc")
        assert removed.returncode == 0 and removed.stdout == "Removed studio-pc and its key.\n"
        assert len(script.requests) == seen  # list and remove contacted no one
    assert ServerBook.at(data_paths()).keys.get("studio-pc") is None
    assert servers("list").stderr.startswith("No servers are added.")


def test_a_server_that_does_not_answer_is_added_and_said_so() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    added = servers("add", "off-box", url)
    assert added.returncode == 0
    assert added.stderr == (f"kestrel: it is added, but: off-box ({url}) did not answer: the connection was refused. "
                            "Is it on, and is its server running? Check the address, then try again.\n")


@pytest.mark.parametrize(("args", "words"), [
    (("add", "a/b", "http://x", "--no-check"), "cannot name a server"),
    (("add", "ok", "ftp://x", "--no-check"), "is not a server address"),
    (("remove", "nobody"), 'No server called "nobody" is added'),
    (("key", "nobody"), 'No server called "nobody" is added'),
])
def test_mistakes_are_said_in_words_with_the_usage_status(args: tuple[str, ...], words: str) -> None:
    result = servers(*args)
    assert result.returncode == 2 and words in result.stderr


def test_models_lists_what_the_server_says_and_a_refusal_is_its_own_status() -> None:
    with hostile_server(Script(models=["m"], ollama=True)) as url:
        servers("add", "box", url, "--kind", "ollama", "--no-check")
        listed = servers("models", "box", "--json")
    assert json_lines(listed.stdout) == [{"id": "box/m", "server": "box", "name": "m", "context_length": 8192,
                                          "abilities": ["tools"], "size": 1, "set_by_hand": None,
                                          "said": {"context_length": 8192, "abilities": ["tools"]}}]
    with hostile_server(Script(list_status=401)) as url:
        servers("add", "locked", url, "--no-check")
        refused = servers("models", "locked")
    assert refused.returncode == 7 and f"locked ({url}) wants a key, and none is set for it (HTTP 401)" in refused.stderr


def test_key_sets_a_new_key_that_the_next_request_sends() -> None:
    script = Script()
    with hostile_server(script) as url:
        servers("add", "s", url, "--no-check")
        assert servers("key", "s", stdin="sk-new\n").returncode == 0
        servers("models", "s")
    assert script.keys[-1] == "Bearer sk-new"


def test_find_asks_only_the_ports_it_is_given_and_tells_each_kind_by_its_answer() -> None:
    ollama, openai = Script(ollama=True), Script()
    with hostile_server(ollama) as ollama_url, hostile_server(openai) as openai_url:
        ports = (UsualPort(int(ollama_url.rsplit(":", 1)[1]), ServerKind.OLLAMA, "Ollama", "/api/version"),
                 UsualPort(int(openai_url.rsplit(":", 1)[1]), ServerKind.OPENAI, "LM Studio", "/models"),
                 UsualPort(closed_port(), ServerKind.OPENAI, "llama-server", "/models"),
                 # An Ollama port answered by something else: not taken for Ollama.
                 UsualPort(int(openai_url.rsplit(":", 1)[1]), ServerKind.OLLAMA, "Ollama", "/api/version"))
        found = find_on_this_pc(ports)
    assert [(f.program, f.url, f.kind) for f in found] == [("Ollama", ollama_url, ServerKind.OLLAMA),
                                                          ("LM Studio", openai_url, ServerKind.OPENAI)]
    assert ollama.requests == ["GET /api/version"] and sorted(openai.requests) == ["GET /api/version", "GET /v1/models"]


def test_find_on_this_pc_says_what_it_found_or_that_nothing_answered() -> None:
    result = servers("find")
    assert result.returncode == 0
    assert result.stdout or result.stderr.startswith("No server answered on this PC's usual ports")


@pytest.mark.slow
def test_chat_streams_a_remote_models_answer_and_a_drop_keeps_what_came(kestrel_home: Path) -> None:
    script = Script(words=["Hello", " from", " afar"])
    with hostile_server(script) as url:
        servers("add", "far", url, "--no-check")
        answered = kestrel("chat", "--model", "far/m", "--json", "Hi")
        assert answered.returncode == 0, answered.stderr
        lines = json_lines(answered.stdout)
        assert "".join(line["text"] for line in lines if line["type"] == "delta") == "Hello from afar"
        assert lines[-1]["type"] == "done" and lines[-1]["device"] == f"far ({url.removeprefix('http://')})"
        script.drop_after = 2
        dropped = kestrel("chat", "--model", "far/m", "Hi")
    assert_no_traceback(dropped)
    assert dropped.returncode == 3 and dropped.stdout.startswith("Hello from")
    assert dropped.stderr.strip().endswith(f"kestrel: far ({url}) stopped answering partway through: the connection "
                                           "closed. What was written is kept; try again.")


@pytest.mark.slow
def test_chat_with_a_server_that_is_off_says_so_before_any_answer() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    servers("add", "studio-pc", url, "--kind", "ollama", "--no-check")
    result = kestrel("chat", "--model", "studio-pc/llama3", "Hi")
    assert_no_traceback(result)
    assert result.returncode == 3 and result.stdout == ""
    assert result.stderr == (f"kestrel: studio-pc ({url}) did not answer: the connection was refused. Is it on, and "
                             "is its server running? Check the address, then try again.\n")


@pytest.mark.slow
def test_kestrel_serve_puts_its_api_in_front_of_a_remote_model(kestrel_home: Path) -> None:
    script = Script(words=["Relayed", " words"])
    with hostile_server(script) as url:
        servers("add", "far", url, "--no-check")
        process = subprocess.Popen(serve_command("--port", str(free_port()), "--model", "far/m"), cwd=ROOT,
                                   env=serve_env(kestrel_home), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        try:
            ready = read_ready(process)
            with openai.OpenAI(base_url=f"{ready.address}/v1", api_key=ready.key, max_retries=0, timeout=60) as client:
                answers = [client.chat.completions.create(model="", messages=[{"role": "user", "content": "Hi"}])
                           for _ in range(2)]
        finally:
            _, err = interrupt(process)
    assert [a.choices[0].message.content for a in answers] == ["Relayed words"] * 2, err
    assert script.requests == ["GET /v1/models", "POST /v1/chat/completions", "POST /v1/chat/completions"]


def test_an_anthropic_compatible_server_is_added_with_its_key_and_lists_its_models() -> None:
    from tests.helpers.anthropic_server import KEY, AnthropicScript, anthropic_server

    script = AnthropicScript(models=["claude-test", "claude-other"])
    with anthropic_server(script) as url:
        added = servers("add", "claude", url, "--kind", "anthropic", "--key-stdin", stdin=f"{KEY}\n")
        assert added.returncode == 0, added.stderr
        assert added.stdout.splitlines()[0] == f"Added claude: an Anthropic-compatible server at {url}."
        assert "It answers with 2 model(s): claude-test, claude-other." in added.stdout
        assert script.headers[-1]["x-api-key"] == KEY and script.headers[-1]["anthropic-version"] == "2023-06-01"
        wrong = servers("add", "wrong", url, "--kind", "anthropic", "--key-stdin", stdin="sk-ant-wrong\n")
    assert wrong.returncode == 0 and "it is added, but: wrong (" in wrong.stderr
    assert "refused the key Kestrel sent (HTTP 401)" in wrong.stderr



def servers_file_models(name: str) -> dict[str, object]:
    """The overrides servers.json keeps for a server, as written (version 1's "models" object)."""
    data = json.loads((data_paths().config / "servers.json").read_text())
    assert data["version"] == 1
    [server] = [s for s in data["servers"] if s["name"] == name]
    return server.get("models", {})


def test_set_keeps_what_the_person_sets_and_models_says_it_beside_what_the_server_says() -> None:
    script = Script(models=["m"], ollama=True)  # its /api/show says 8192 tokens and tools
    with hostile_server(script) as url:
        servers("add", "box", url, "--kind", "ollama", "--no-check")
        set_ = servers("set", "box", "m", "--context", "2048", "--vision")
        assert set_.returncode == 0, set_.stderr
        assert set_.stdout == ("box/m: context 2,048 tokens, abilities tools, vision (set by hand; kestrel servers "
                               "set box m --reset goes back to what the server says).\n")
        assert servers_file_models("box") == {"m": {"context_length": 2048, "abilities": ["tools", "vision"]}}
        listed = servers("models", "box")
        assert listed.stdout == ("box/m\t2,048 tokens (set by hand; the server says 8,192)\ttools, vision (set by "
                                 "hand; the server says tools)\n")
        [as_json] = json_lines(servers("models", "box", "--json").stdout)
        assert (as_json["context_length"], as_json["abilities"]) == (2048, ["tools", "vision"])
        assert as_json["set_by_hand"] == {"context_length": 2048, "abilities": ["tools", "vision"]}
        assert as_json["said"] == {"context_length": 8192, "abilities": ["tools"]}

        asked = len(script.requests)
        assert servers("set", "box", "m", "--no-tools").returncode == 0  # from what was set: the server is not asked
        assert len(script.requests) == asked
        assert servers_file_models("box") == {"m": {"context_length": 2048, "abilities": ["vision"]}}
        reset = servers("set", "box", "m", "--reset")
        assert reset.stdout == "box/m is as its server says: nothing is set by hand.\n"
        assert servers_file_models("box") == {}
        assert servers("models", "box").stdout == "box/m\t8,192 tokens\ttools\n"


def test_set_on_a_server_that_says_nothing_keeps_tools_offered_and_needs_no_answer_when_all_are_named() -> None:
    script = Script(models=["m"])  # OpenAI-compatible: its /v1/models says no abilities and no context
    with hostile_server(script) as url:
        servers("add", "lm", url, "--no-check")
        assert servers("models", "lm").stdout == "lm/m\tcontext not said\tabilities not said\n"
        assert servers("set", "lm", "m", "--vision").returncode == 0
        assert servers_file_models("lm") == {"m": {"abilities": ["tools", "vision"]}}  # tools were offered: still
    off = servers("set", "lm", "m", "--reset", "--embeddings")  # its server is gone now
    assert off.returncode == 7
    assert off.stderr.startswith(f"kestrel: lm ({url}) did not answer") and "name all three" in off.stderr
    assert servers_file_models("lm") == {"m": {"abilities": ["tools", "vision"]}}  # nothing was changed
    named = servers("set", "lm", "m", "--reset", "--embeddings", "--no-tools", "--no-vision", "--context", "512")
    assert named.returncode == 0, named.stderr
    assert servers_file_models("lm") == {"m": {"context_length": 512, "abilities": ["embeddings"]}}


@pytest.mark.parametrize(("args", "words"), [
    (("set", "box", "m"), "Say what to set: --context N"),
    (("set", "box", "m", "--context", "10"), "A context length is from 256 to 16,777,216 tokens (got 10)."),
    (("set", "nobody", "m", "--vision"), 'No server called "nobody" is added'),
    (("set", "box", "other", "--tools"), 'box lists no model called "other"'),
    (("pair", "ftp://x", "123"), "is not a server address"),
])
def test_set_and_pair_mistakes_are_said_in_words_with_the_usage_status(args: tuple[str, ...], words: str) -> None:
    with hostile_server(Script(models=["m"])) as url:
        servers("add", "box", url, "--no-check")
        result = servers(*args)
    assert result.returncode == 2 and words in result.stderr, result.stderr


@pytest.mark.slow
def test_a_context_length_set_by_hand_is_the_one_the_engine_loads_and_sends() -> None:
    """Ollama's /api/show says 8,192; set by hand to 1,536, the engine loads that (not the 4,096 asked) and sends
    it as num_ctx."""
    script = Script(models=["m"], ollama=True, words=["Hi"])
    with hostile_server(script) as url:
        servers("add", "box", url, "--kind", "ollama", "--no-check")
        assert servers("set", "box", "m", "--context", "1536").returncode == 0

        async def work(client: EngineClient) -> object:
            loaded = await client.load(remote_address("box", "m"), context_length=4096)
            return loaded, await stream(client)

        loaded, answer = with_engine(work)  # type: ignore[misc]
        assert servers("set", "box", "m", "--reset").returncode == 0

        async def again(client: EngineClient) -> object:
            return await client.load(remote_address("box", "m"), context_length=4096)

        as_said = with_engine(again)
    assert loaded.context_length == 1536 and answer.error is None and answer.text == "Hi"
    assert [b["options"]["num_ctx"] for b in script.bodies if "messages" in b] == [1536]
    assert as_said.context_length == 4096  # type: ignore[attr-defined]
