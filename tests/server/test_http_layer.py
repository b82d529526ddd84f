"""The API server's HTTP layer over a double of the service: shapes, keys, errors, life cycle.

Real sockets on 127.0.0.1 and the official clients; the answers come from FakeAnswers
(tests/server/helpers.py). The service itself is tested end to end in test_api_*.py.
"""

from __future__ import annotations

import json
import socket
import threading

import anthropic
import httpx2 as httpx
import openai
import pytest

from app.core.answer_stats import FinishReason
from app.core.server_settings import ServerSettings
from app.engine.protocol import AnswerShape, ToolCall
from app.server.runner import ApiServer, ServerState
from app.service.api.api_answers import ApiRefused
from tests.server.helpers import KEY, FakeAnswers, anthropic_client, loop_thread, openai_client, serving, until

AUTH = {"Authorization": f"Bearer {KEY}"}
HELLO = [{"role": "user", "content": "Hello"}]



def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_nothing_listens_before_start_or_after_stop() -> None:
    port = free_port()
    with loop_thread() as thread:
        server = thread.call(_server(FakeAnswers(), ServerSettings(port=port, key=KEY)))
        assert server.state is ServerState.OFF and not listening(port)
        assert thread.call(server.start()), server.error
        assert server.state is ServerState.ON and server.address == f"http://127.0.0.1:{port}"
        assert listening(port)
        thread.call(server.stop())
        assert server.state is ServerState.OFF and not listening(port)
        assert thread.call(server.start()), server.error  # and it starts again on the same port
        thread.call(server.stop())


async def _server(answers: FakeAnswers, settings: ServerSettings) -> ApiServer:
    changes: list[ServerState] = []
    server = ApiServer(answers, lambda: settings, on_change=lambda: changes.append(server.state))
    return server


def test_a_port_in_use_fails_in_plain_words() -> None:
    with socket.socket() as taken, loop_thread() as thread:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = thread.call(_server(FakeAnswers(), ServerSettings(port=port, key=KEY)))
        assert not thread.call(server.start())
        assert server.state is ServerState.FAILED
        assert f"Port {port} on 127.0.0.1 is already in use" in server.error


def test_an_address_beyond_this_pc_needs_the_setting_and_warns(capfd: pytest.CaptureFixture[str]) -> None:
    with loop_thread() as thread:
        refused = thread.call(_server(FakeAnswers(), ServerSettings(host="0.0.0.0", port=0, key=KEY)))
        assert not thread.call(refused.start())
        assert refused.state is ServerState.FAILED and "other machines" in refused.error
        allowed = ServerSettings(host="0.0.0.0", port=0, key=KEY, listen_beyond_this_pc=True)
        with serving(thread, FakeAnswers(), allowed) as server:
            assert "other machines on the network can reach it" in server.warning
        assert server.warning in capfd.readouterr().err


def test_a_missing_or_wrong_key_gets_401_in_each_providers_shape() -> None:
    fake = FakeAnswers()
    with loop_thread() as thread, serving(thread, fake) as server:
        with pytest.raises(openai.AuthenticationError) as wrong:
            openai_client(server.address, "kestrel-wrong").chat.completions.create(model="tiny", messages=HELLO)
        assert wrong.value.status_code == 401 and wrong.value.code == "invalid_api_key"
        with pytest.raises(anthropic.AuthenticationError) as anthropic_wrong:
            anthropic_client(server.address, "kestrel-wrong").messages.create(model="tiny", max_tokens=8,
                                                                              messages=HELLO)
        assert anthropic_wrong.value.body["error"]["type"] == "authentication_error"
        none = httpx.get(f"{server.address}/v1/models")
        assert none.status_code == 401 and "Authorization: Bearer" in none.json()["error"]["message"]
        by_header = httpx.get(f"{server.address}/v1/models", headers={"x-api-key": KEY})
        assert by_header.status_code == 200
        assert fake.asks == []  # nothing reached the service
        # A request is logged once its answer has gone out: the last may still be on its way.
        thread.call(until(lambda: len(fake.records) == 4, "every request logged"))
        assert [record.status for record in fake.records] == [401, 401, 401, 200]


def test_keyless_loopback_lets_this_pc_in_without_a_key() -> None:
    with loop_thread() as thread, serving(thread, FakeAnswers(), ServerSettings(port=0, keyless_loopback=True)) as server:
        assert httpx.get(f"{server.address}/v1/models").status_code == 200


@pytest.mark.parametrize(("body", "param"), [
    ({"messages": "hello"}, "messages"),
    ({}, "messages"),
    ({"messages": [{"role": "user", "content": 3}]}, "messages[0].content"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
    ({"messages": HELLO, "temperature": "hot"}, "temperature"),
    ({"messages": HELLO, "max_tokens": 0}, "max_tokens"),
    ({"messages": HELLO, "max_tokens": 1.5}, "max_tokens"),
    ({"messages": HELLO, "stop": 5}, "stop"),
    ({"messages": HELLO, "stream": "yes"}, "stream"),
    ({"messages": HELLO, "context_length": "big"}, "context_length"),
    ({"messages": HELLO, "response_format": {"type": "xml"}}, "response_format.type"),
    ({"messages": HELLO, "response_format": {"type": "json_schema", "json_schema": {"schema": {"$ref": "#/x"}}}},
     "response_format.json_schema.schema"),
    ({"messages": HELLO, "tools": [{"type": "function", "function": {}}]}, "tools[0].function.name"),
    ({"messages": HELLO, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "x"}}]}]},
     "messages[0].content[0].type"),
])
def test_a_malformed_chat_body_gets_400_naming_the_field(body: dict[str, object], param: str) -> None:
    fake = FakeAnswers()
    with loop_thread() as thread, serving(thread, fake) as server:
        reply = httpx.post(f"{server.address}/v1/chat/completions", headers=AUTH, json=body)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param, error
    assert fake.asks == []


def test_a_body_that_is_not_json_or_a_bad_anthropic_one_gets_400() -> None:
    with loop_thread() as thread, serving(thread, FakeAnswers()) as server:
        garbled = httpx.post(f"{server.address}/v1/chat/completions", headers=AUTH, content=b"{not json")
        assert garbled.status_code == 400 and "not valid JSON" in garbled.json()["error"]["message"]
        with pytest.raises(anthropic.BadRequestError) as no_max:
            anthropic_client(server.address).messages.create(model="tiny", messages=HELLO,
                                                              max_tokens=None)  # type: ignore[arg-type]
        assert no_max.value.body == {"type": "error", "error": {
            "type": "invalid_request_error", "message": "max_tokens is required: a whole number."}}


def test_the_request_fields_reach_the_service_and_unknown_ones_are_ignored() -> None:
    fake = FakeAnswers()
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                               "parameters": {"type": "object", "properties": {}}}}]
    with loop_thread() as thread, serving(thread, fake) as server:
        openai_client(server.address).chat.completions.create(
            model="tiny", temperature=0.2, top_p=0.5, max_completion_tokens=33, seed=4, stop="END",
            messages=[{"role": "developer", "content": "Be brief."},
                      {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "you"}]},
                      {"role": "assistant", "content": None, "tool_calls": [
                          {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
                      {"role": "tool", "tool_call_id": "call_a", "content": "Sunny"}],
            response_format={"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}},
            tools=tools, tool_choice="required",  # type: ignore[arg-type]
            extra_body={"context_length": 8192, "frobnicate": True})
    ask = fake.asks[0]
    assert ask.endpoint == "/v1/chat/completions" and ask.model == "tiny" and ask.client.startswith("127.0.0.1:")
    assert dict(ask.settings) == {"temperature": 0.2, "top_p": 0.5, "max_tokens": 33, "seed": 4}
    assert ask.stop == ("END",) and ask.context_length == 8192
    assert [(m.role.value, m.content) for m in ask.messages] == [
        ("system", "Be brief."), ("user", "Hi you"), ("assistant", ""), ("tool", "Sunny")]
    assert ask.messages[2].tool_calls == (ToolCall(0, "call_a", "get_weather", "{}"),)
    assert ask.messages[3].tool_call_id == "call_a"
    assert ask.shape.grammar is None and json.loads(ask.shape.json_schema or "") == schema
    assert json.loads(ask.shape.tools or "") == tools and ask.shape.tool_choice == "required"


def test_json_object_and_a_schema_reach_the_engine_as_they_came() -> None:
    fake = FakeAnswers()
    with loop_thread() as thread, serving(thread, fake) as server:
        openai_client(server.address).chat.completions.create(model="tiny", messages=HELLO,
                                                              response_format={"type": "json_object"})
        openai_client(server.address).responses.create(model="tiny", input="Hi", text={"format": {
            "type": "json_schema", "name": "x", "schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}})
    # The engine's backend builds what it follows (llama.cpp: app/engine/backends/llama/grammar.py).
    assert fake.asks[0].shape == AnswerShape(json_object=True)
    assert fake.asks[1].shape.grammar is None and json.loads(fake.asks[1].shape.json_schema or "") == {
        "type": "object", "properties": {"n": {"type": "integer"}}}


def test_anthropic_tool_blocks_and_system_reach_the_service() -> None:
    fake = FakeAnswers()
    with loop_thread() as thread, serving(thread, fake) as server:
        anthropic_client(server.address).messages.create(
            model="tiny", max_tokens=20, system="Be brief.", stop_sequences=["END"], extra_body={"temperature": 0.3},
            tools=[{"name": "get_weather", "input_schema": {"type": "object", "properties": {}}}],
            tool_choice={"type": "any"},
            messages=[{"role": "user", "content": "Weather?"},
                      {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                                         "input": {"city": "Paris"}}]},
                      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                    "content": "Sunny"}]}])
    ask = fake.asks[0]
    assert [(m.role.value, m.content, m.tool_call_id) for m in ask.messages] == [
        ("system", "Be brief.", ""), ("user", "Weather?", ""), ("assistant", "", ""), ("tool", "Sunny", "toolu_1")]
    assert ask.messages[2].tool_calls == (ToolCall(0, "toolu_1", "get_weather", '{"city": "Paris"}'),)
    assert ask.stop == ("END",) and dict(ask.settings) == {"temperature": 0.3, "max_tokens": 20}
    assert ask.shape.tool_choice == "required" and json.loads(ask.shape.tools or "")[0]["function"]["name"] == "get_weather"


def test_a_refusal_keeps_its_status_and_retry_after() -> None:
    fake = FakeAnswers(refuse=ApiRefused(503, "Four requests are waiting already.", code="queue_full", retry_after=5))
    with loop_thread() as thread, serving(thread, fake) as server:
        reply = httpx.post(f"{server.address}/v1/chat/completions", headers=AUTH,
                           json={"messages": HELLO, "stream": True})
        assert reply.status_code == 503 and reply.headers["retry-after"] == "5"
        assert reply.json()["error"] == {"message": "Four requests are waiting already.", "type": "server_error",
                                         "param": None, "code": "queue_full"}
        with pytest.raises(anthropic.InternalServerError) as refused:
            anthropic_client(server.address).messages.create(model="tiny", max_tokens=8, messages=HELLO)
        assert refused.value.status_code == 503
        assert refused.value.body["error"]["type"] == "overloaded_error"


def test_streamed_tool_calls_arrive_as_the_openai_client_accumulates_them() -> None:
    calls = (ToolCall(0, "call_a", "get_weather", '{"city":"Paris"}'), ToolCall(1, "call_b", "get_time", "{}"))
    fake = FakeAnswers(pieces=("Let me look.", *calls))
    with loop_thread() as thread, serving(thread, fake) as server:
        with openai_client(server.address).chat.completions.stream(model="tiny", messages=HELLO) as stream:
            for _ in stream:
                pass
            final = stream.get_final_completion()
        raw = httpx.post(f"{server.address}/v1/chat/completions", headers=AUTH,
                         json={"messages": HELLO, "stream": True}).text
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == "Let me look."
    assert [(c.id, c.function.name, c.function.arguments) for c in choice.message.tool_calls or []] == [
        ("call_a", "get_weather", '{"city":"Paris"}'), ("call_b", "get_time", "{}")]
    chunks = [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]
    deltas = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks if "tool_calls" in c["choices"][0]["delta"]]
    assert deltas[0] == {"index": 0, "id": "call_a", "type": "function",
                         "function": {"name": "get_weather", "arguments": ""}}
    assert deltas[1] == {"index": 0, "function": {"arguments": '{"city":"Paris"}'}}
    assert raw.endswith("data: [DONE]\n\n")


def test_usage_comes_last_when_asked_and_length_says_length() -> None:
    fake = FakeAnswers(finish=FinishReason.LENGTH)
    with loop_thread() as thread, serving(thread, fake) as server:
        chunks = list(openai_client(server.address).chat.completions.create(
            model="tiny", messages=HELLO, stream=True, stream_options={"include_usage": True}))
    assert chunks[-2].choices[0].finish_reason == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (7, 3)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello there."


def test_a_failure_mid_stream_reaches_each_client_as_its_error() -> None:
    fake = FakeAnswers(fail_midway=ApiRefused(500, "The engine stopped (it ran out of memory)."))
    with loop_thread() as thread, serving(thread, fake) as server:
        with pytest.raises(openai.APIError, match="ran out of memory"):
            list(openai_client(server.address).chat.completions.create(model="tiny", messages=HELLO, stream=True))
        with pytest.raises(anthropic.APIStatusError, match="ran out of memory"):
            with anthropic_client(server.address).messages.stream(model="tiny", max_tokens=8, messages=HELLO) as s:
                s.get_final_message()
    assert [record.status for record in fake.records] == [500, 500]


def test_a_client_that_disconnects_mid_stream_closes_its_answer() -> None:
    fake = FakeAnswers(hold=True)
    with loop_thread() as thread, serving(thread, fake) as server:
        with httpx.stream("POST", f"{server.address}/v1/chat/completions", headers=AUTH,
                          json={"messages": HELLO, "stream": True}, timeout=30) as reply:
            first = next(reply.iter_lines())
            assert first.startswith("data: ")
        thread.call(until(lambda: fake.closed == 1, "the answer closed"))
        thread.call(until(lambda: len(fake.records) == 1, "the request logged"))
    assert fake.records[0].status == 499 and fake.records[0].model == "tiny"


def test_stop_ends_an_open_stream_and_its_answer() -> None:
    fake = FakeAnswers(hold=True)
    lines: list[str] = []
    with loop_thread() as thread:
        with serving(thread, fake) as server:
            def read() -> None:
                with httpx.stream("POST", f"{server.address}/v1/chat/completions", headers=AUTH,
                                  json={"messages": HELLO, "stream": True}, timeout=30) as reply:
                    lines.extend(reply.iter_lines())

            reader = threading.Thread(target=read)
            reader.start()
            thread.call(until(lambda: fake.started == 1, "the answer started"))
        reader.join(30)
        assert not reader.is_alive()
    assert fake.closed == 1 and any("Hello" in line for line in lines) and "data: [DONE]" not in lines


def test_cors_is_off_unless_origins_are_listed() -> None:
    preflight = {"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"}
    with loop_thread() as thread:
        with serving(thread, FakeAnswers()) as server:
            off = httpx.options(f"{server.address}/v1/chat/completions", headers=preflight)
            assert "access-control-allow-origin" not in off.headers
        listed = ServerSettings(port=0, key=KEY, cors_origins=("http://localhost:3000",))
        with serving(thread, FakeAnswers(), listed) as server:
            on = httpx.options(f"{server.address}/v1/chat/completions", headers=preflight)
            assert on.status_code == 200
            assert on.headers["access-control-allow-origin"] == "http://localhost:3000"
            other = httpx.options(f"{server.address}/v1/chat/completions",
                                  headers={**preflight, "Origin": "http://evil.example"})
            assert other.status_code == 400


def test_embeddings_say_what_to_install_and_unknown_paths_answer_in_shape() -> None:
    with loop_thread() as thread, serving(thread, FakeAnswers()) as server:
        with pytest.raises(openai.BadRequestError, match="No embedding model is installed"):
            openai_client(server.address).embeddings.create(model="tiny", input="hello")
        missing = httpx.get(f"{server.address}/v1/nothing", headers=AUTH)
        assert missing.status_code == 404 and "POST /v1/chat/completions" in missing.json()["error"]["message"]


def test_the_request_log_gets_model_tokens_and_status() -> None:
    fake = FakeAnswers()
    with loop_thread() as thread, serving(thread, fake) as server:
        openai_client(server.address).completions.create(model="tiny", prompt="Once upon")
        thread.call(until(lambda: len(fake.records) == 1, "the request logged"))
    record = fake.records[0]
    assert fake.asks[0].shape.prompt == "Once upon"
    assert (record.endpoint, record.model, record.prompt_tokens, record.completion_tokens, record.status) == (
        "/v1/completions", "tiny", 7, 3, 200)
    assert record.tokens_per_s == 50.0 and record.client.startswith("127.0.0.1:")
