"""Issue 35, the schema door (items 1, 4 and 11's schemas): JSON schemas whose grammar llama.cpp
cannot hold, sent as response_format, as an API tool's parameters and as an MCP tool's inputSchema.

Each case is the issue's own schema, through the real API server (real llama.cpp on the tiny model,
real HTTP on 127.0.0.1) or the real `kestrel chat --tools`. What must hold: the engine never dies
(the next request is answered), the client hears a 400 that names the keyword and where it is, or
the call stays free; and the server's loop keeps answering while a schema is refused.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from app.core.paths import data_paths
from app.core.settings import Settings, SettingsFile
from app.server import openai_asks
from app.server.errors import BadRequest
from app.server.fields import Body
from app.server.runner import ApiServer
from app.service.models.client import EngineClient
from app.service.root import Service
from app.tools.mcp_config import McpServerConfig, write_mcp_config
from tests.cli.test_chat_cli import assert_no_traceback, json_lines, kestrel
from tests.helpers.tool_call_gguf import build_tool_call_gguf
from tests.server.helpers import KEY, FakeAnswers, LoopThread, api_over, loop_thread, real_service, serving

HELLO = [{"role": "user", "content": "Hello"}]
AUTH = {"Authorization": f"Bearer {KEY}"}
SERVER = Path(__file__).resolve().parent / "schema_server.py"

# The schemas, as it gives them.
MAX_LENGTH = {"type": "string", "maxLength": 100_000}
MANY_ITEMS = {"type": "array", "items": {"type": "string"}, "minItems": 10_000, "maxItems": 100_000}
MIN_LENGTH_8 = {"type": "object", "properties": {"name": {"type": "string", "minLength": 10**8}}, "required": ["name"]}
MIN_LENGTH_9 = {"type": "object", "properties": {"name": {"type": "string", "minLength": 10**9}}, "required": ["name"]}
ENUM_100K = {"enum": [f"value{number}" for number in range(100_000)]}
REF_ITSELF = {"$ref": "#"}


def nested(levels: int) -> dict[str, Any]:
    """A schema `levels` deep: an array of arrays of ... strings."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels - 1):
        schema = {"type": "array", "items": schema}
    return schema


NESTED_900 = nested(900)

# (schema, the keyword the 400 names, where, and the number asked for)
BEYOND = [
    (MAX_LENGTH, "maxLength", "$", "100,000"),
    (MANY_ITEMS, "maxItems", "$", "100,000"),
    (MIN_LENGTH_8, "minLength", "$.properties.name", "100,000,000"),
    (MIN_LENGTH_9, "minLength", "$.properties.name", "1,000,000,000"),
    (ENUM_100K, "enum", "$", "100,000"),
    (NESTED_900, "nesting", "$.items", "deeper than 100 levels"),
]


@contextmanager
def api(model: Path) -> Iterator[tuple[LoopThread, Service, ApiServer]]:
    """The real service on the real engine over `model`, and the API server over it."""
    with loop_thread() as thread, real_service(thread, model, EngineClient()) as service, \
            api_over(thread, service) as server:
        yield thread, service, server


def post(server: ApiServer, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.address}{path}", headers=AUTH, json=body, timeout=120)


def assert_alive(server: ApiServer, model: str) -> None:
    """The engine that refused the schema answers the next request (it did not die)."""
    reply = post(server, "/v1/chat/completions", {"model": model, "messages": HELLO, "max_tokens": 4})
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["message"]["content"]


def assert_refused(reply: httpx.Response, param: str, keyword: str, where: str, asked: str) -> str:
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param, error
    message = str(error["message"])
    assert keyword in message and f"at {where}" in message and asked in message, message
    assert "at most" in message and "Traceback" not in message, message
    return message


# --- items 1, 4 and 11: response_format and text.format ------------------------------------------------------

def test_response_format_schemas_beyond_the_bounds_are_400_naming_keyword_and_path(tiny_model: Path) -> None:
    with api(tiny_model) as (_, service, server):
        model = service.session.model.id
        for schema, keyword, where, asked in BEYOND:
            chat = post(server, "/v1/chat/completions", {"model": model, "messages": HELLO, "response_format": {
                "type": "json_schema", "json_schema": {"name": "x", "schema": schema}}})
            message = assert_refused(chat, "response_format.json_schema.schema", keyword, where, asked)
            assert message.startswith("response_format.json_schema.schema: "), message
            responses = post(server, "/v1/responses", {"model": model, "input": "Hi", "text": {"format": {
                "type": "json_schema", "name": "x", "schema": schema}}})
            assert_refused(responses, "text.format.schema", keyword, where, asked)
        assert_alive(server, model)


def test_a_schema_at_the_bounds_still_holds_the_answer(tiny_model: Path) -> None:
    """What llama.cpp can hold keeps working: a 1,000-long string, an enum of 1,000 values."""
    schema = {"type": "object", "properties": {"word": {"type": "string", "maxLength": 1000},
                                               "pick": {"enum": [f"v{n}" for n in range(1000)]}},
              "required": ["pick", "word"], "additionalProperties": False}
    with api(tiny_model) as (_, service, server):
        reply = post(server, "/v1/chat/completions", {
            "model": service.session.model.id, "messages": HELLO, "max_tokens": 60, "temperature": 0,
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}})
        assert reply.status_code == 200, reply.text
        assert reply.json()["choices"][0]["message"]["content"].startswith('{')


def test_the_loop_answers_while_a_huge_minLength_is_refused(tiny_model: Path) -> None:
    """minLength 10^8 once blocked the server's loop 6.6 s: GET /v1/models answers meanwhile now."""
    with api(tiny_model) as (thread, service, server):
        lags: list[float] = []
        stop = threading.Event()

        async def watch() -> None:
            while not stop.is_set():
                before = time.perf_counter()
                await asyncio.sleep(0.01)
                lags.append(time.perf_counter() - before)

        watcher = asyncio.run_coroutine_threadsafe(watch(), thread.loop)
        replies: list[httpx.Response] = []
        refused = threading.Thread(target=lambda: replies.append(post(server, "/v1/chat/completions", {
            "model": service.session.model.id, "messages": HELLO,
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": MIN_LENGTH_8}}})))
        refused.start()
        models = [httpx.get(f"{server.address}/v1/models", headers=AUTH, timeout=30) for _ in range(5)]
        refused.join(120)
        stop.set()
        watcher.result(30)
        assert max(lags) < 2.0, f"the loop was blocked {max(lags):.1f} s"
        assert all(reply.status_code == 200 for reply in models)
        assert replies and replies[0].status_code == 400, replies
        assert_alive(server, service.session.model.id)


# Each endpoint that reads its request off the loop (the chat route joins once app/server/openai_routes.py does).
OFF_LOOP = [("/v1/responses", {"input": "Hi", "text": {"format": {"type": "json_schema", "name": "x", "schema": {
    "type": "object", "properties": {"ok": {"type": "boolean"}}}}}}),
            ("/v1/chat/completions", {"messages": HELLO, "response_format": {"type": "json_schema", "json_schema": {
                "name": "x", "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}}})]


@pytest.mark.parametrize(("path", "body"), OFF_LOOP, ids=[path for path, _ in OFF_LOOP])
def test_a_schema_is_checked_on_a_worker_thread_and_sent_on_as_it_came(monkeypatch: pytest.MonkeyPatch, path: str,
                                                                       body: dict[str, Any]) -> None:
    where: list[str] = []
    check = openai_asks.answer_schema

    def watched(schema: Any, param: str) -> str:
        try:
            asyncio.get_running_loop()
            where.append("the loop")
        except RuntimeError:
            where.append("a worker thread")
        return check(schema, param)

    monkeypatch.setattr(openai_asks, "answer_schema", watched)
    fake = FakeAnswers()
    with loop_thread() as thread, serving(thread, fake) as server:
        reply = post(server, path, {"model": "tiny", **body})
    assert reply.status_code == 200, reply.text
    assert where == ["a worker thread"]
    # The engine's backend makes its grammar of it (app/engine/backends/llama/grammar.py): the server converts nothing.
    shape = fake.asks[0].shape
    assert shape.grammar is None and json.loads(shape.json_schema or "") == {
        "type": "object", "properties": {"ok": {"type": "boolean"}}}


def test_reading_a_request_is_bounded_in_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(openai_asks, "READ_BUDGET_S", 0.2)

    def slow(body: Body, client: str) -> openai_asks.Asked:
        time.sleep(1)
        raise AssertionError("not reached in time")

    with pytest.raises(BadRequest) as refused:
        asyncio.run(openai_asks.read_off_loop(slow, Body({}), "test"))
    assert "took more than 0.2 s" in refused.value.message and "JSON schema" in refused.value.message


# --- item 1 and 11: an API tool's parameters --------------------------------------------------------------------

def _tool(parameters: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": "get_time", "parameters": parameters}}]


@pytest.fixture(scope="module")
def caller(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """llama.cpp on a tiny GGUF whose weights call get_time({"zone": "UTC"})."""
    return build_tool_call_gguf(tmp_path_factory.mktemp("caller") / "caller.gguf")


def test_a_forced_call_to_a_tool_beyond_the_bounds_is_400_naming_the_tool(caller: Path) -> None:
    with api(caller) as (_, service, server):
        model = service.session.model.id
        for schema, keyword, where, asked in BEYOND:
            reply = post(server, "/v1/chat/completions", {"model": model, "messages": HELLO, "tools": _tool(schema),
                                                          "tool_choice": "required"})
            assert_refused(reply, "tools[0].function.parameters", keyword, where, asked)
        assert_alive(server, model)


def test_an_anthropic_tool_beyond_the_bounds_is_400_naming_it(caller: Path) -> None:
    with api(caller) as (_, service, server):
        model = service.session.model.id
        for choice in ({"type": "any"}, {"type": "tool", "name": "get_time"}):
            reply = post(server, "/v1/messages", {"model": model, "max_tokens": 40, "messages": HELLO,
                                                  "tools": [{"name": "get_time", "input_schema": MAX_LENGTH}],
                                                  "tool_choice": choice})
            assert reply.status_code == 400, reply.text
            error = reply.json()["error"]
            assert error["type"] == "invalid_request_error", reply.text
            assert "tools[0].input_schema" in error["message"] and "maxLength 100,000" in error["message"], reply.text
        assert_alive(server, model)


def test_a_tool_that_refers_to_itself_or_nests_900_deep_is_400_not_500(caller: Path) -> None:
    with api(caller) as (_, service, server):
        model = service.session.model.id
        for choice in ("required", "auto"):
            deep = post(server, "/v1/chat/completions", {"model": model, "messages": HELLO, "tools": _tool(NESTED_900),
                                                         "tool_choice": choice})
            assert_refused(deep, "tools[0].function.parameters", "nesting", "$.items", "deeper than 100 levels")
        forced = post(server, "/v1/chat/completions", {"model": model, "messages": HELLO, "tools": _tool(REF_ITSELF),
                                                       "tool_choice": "required"})
        assert forced.status_code == 400, forced.text
        assert "get_time" in forced.json()["error"]["message"], forced.text
        free = post(server, "/v1/chat/completions", {"model": model, "messages": HELLO, "tools": _tool(REF_ITSELF),
                                                     "max_tokens": 40})
        assert free.status_code == 200, free.text
        assert_alive(server, model)


def test_under_tool_choice_auto_a_call_to_such_a_tool_stays_free(caller: Path) -> None:
    """The lazy grammar cannot hold these tools' calls, so it leaves them free: the call is made as written."""
    with api(caller) as (_, service, server):
        model = service.session.model.id
        for schema in (MAX_LENGTH, MANY_ITEMS, MIN_LENGTH_8):  # (an enum of 100,000 is a prompt too long here)
            reply = post(server, "/v1/chat/completions", {"model": model, "messages": HELLO, "tools": _tool(schema),
                                                          "max_tokens": 40})
            assert reply.status_code == 200, reply.text
            choice = reply.json()["choices"][0]
            assert choice["finish_reason"] == "tool_calls", choice
            call = choice["message"]["tool_calls"][0]["function"]
            assert (call["name"], json.loads(call["arguments"])) == ("get_time", {"zone": "UTC"})
        assert_alive(server, model)


# --- item 1 and 4: an MCP tool's inputSchema in `kestrel chat --tools` ------------------------------------------

# An MCP tool's inputSchema is an object (the SDK drops a tool whose schema is not): the schemas as properties.
MCP_SCHEMAS = [{"type": "object", "properties": {"zone": MAX_LENGTH}},
               {"type": "object", "properties": {"zone": {"type": "string"}, "zones": MANY_ITEMS}},
               {"type": "object", "properties": {"zone": {"type": "string", "minLength": 10**8}}}]


@pytest.mark.parametrize("schema", MCP_SCHEMAS, ids=["maxLength", "maxItems", "minLength"])
def test_an_mcp_tool_whose_schema_no_grammar_can_hold_is_called_freely(caller: Path, schema: dict[str, Any]) -> None:
    paths = data_paths().ensure()
    write_mcp_config(paths.mcp_file, [McpServerConfig("schema", command=sys.executable,
                                                      args=(str(SERVER), json.dumps(schema)))])
    SettingsFile(paths.settings_file).save(Settings(tool_rounds=1))
    result = kestrel("chat", "--model", str(caller), "--tools", "schema", "--allow-tools", "get_time", "--json",
                     "--temperature", "0", "What time is it?")
    assert_no_traceback(result)
    assert result.returncode == 0, result.stderr
    assert "engine" not in result.stderr.lower(), result.stderr
    lines = json_lines(result.stdout)
    call = next(line for line in lines if line["type"] == "tool_call")
    assert (call["name"], call["arguments"]) == ("get_time", {"zone": "UTC"})
    answer = next(line for line in lines if line["type"] == "tool_result")
    assert answer["text"] == "12:00 in UTC" and lines[-1]["type"] == "done"


def test_a_schema_within_the_bounds_that_llama_cpp_cannot_follow_is_a_400_naming_its_field(tiny_model: Path) -> None:
    # The engine builds the grammar now; its refusal still names the request's field, as the server's did.
    with api(tiny_model) as (_, service, server):
        model = service.session.model.id
        for path, body, param in (
                ("/v1/chat/completions", {"messages": HELLO, "response_format": {"type": "json_schema", "json_schema": {
                    "name": "x", "schema": {"type": "nonsense"}}}}, "response_format.json_schema.schema"),
                ("/v1/responses", {"input": "Hi", "text": {"format": {"type": "json_schema", "name": "x",
                                                                      "schema": {"type": "nonsense"}}}},
                 "text.format.schema")):
            reply = post(server, path, {"model": model, "max_tokens": 4, **body})
            assert reply.status_code == 400, reply.text
            error = reply.json()["error"]
            assert error["param"] == param and error["message"].startswith(f"{param}: "), reply.text
        assert_alive(server, model)
