"""Anthropic-compatible servers through the real engine process: a second `kestrel serve` spoken to in Anthropic's
Messages API (a real peer), and a loopback server in Anthropic's documented shapes that the official `anthropic`
client reads too (what Kestrel sends and reads is held against that client's own types and parsing)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pydantic
import pytest
from anthropic.types import MessageParam, ToolChoiceParam, ToolParam, message_create_params

from app.core.answer_stats import FinishReason
from app.core.conversation import Role
from app.core.generation import GenerationSettings
from app.core.paths import DataPaths, data_paths
from app.engine.protocol import AnswerShape, ChatMessage, ToolCall
from app.library.models import ModelLibrary
from app.library.servers.book import ServerBook
from app.library.servers.faults import ServerTrouble
from app.library.servers.records import ServerKind
from app.service.models.client import EngineClient
from tests.helpers.anthropic_server import KEY, AnthropicScript, anthropic_server, events
from tests.helpers.remote_answers import Streamed, add_server, load, stream, with_engine
from tests.helpers.remote_peers import KestrelPeer, closed_port, kestrel_peer

GET_TIME = [{"type": "function", "function": {"name": "get_time", "description": "The time now in a zone.",
                                              "parameters": {"type": "object", "properties": {"zone": {"type": "string"}},
                                                             "required": ["zone"]}}}]
GREEDY = GenerationSettings(temperature=0.0, max_tokens=12)
CALLED = events(["Let me", " look."], call=("get_time", "toolu_01", ['{"zone":', ' "UTC"}']))


def _answer(server: str, model: str, messages: tuple[ChatMessage, ...] = (ChatMessage("user", "hello"),),
            settings: GenerationSettings | None = None, shape: AnswerShape | None = None) -> Streamed:
    async def work(client: EngineClient) -> Streamed:
        refused = await load(client, server, model)
        assert refused is None, refused
        return await stream(client, messages, settings or GenerationSettings(max_tokens=64), shape)

    result = with_engine(work)
    assert isinstance(result, Streamed)
    return result


def _refusal_at_load(server: str, model: str) -> Any:
    async def work(client: EngineClient) -> object:
        return await load(client, server, model)

    refused = with_engine(work)
    assert refused is not None
    return refused


# Sampling as the Messages API's version 2023-06-01 (the one Kestrel names) has it, and Anthropic-compatible servers
# (Kestrel's own, llama-server, LiteLLM) read: the official client's newest types (API version 2026-10-21) have none.
SAMPLING = {"temperature", "top_k"}


def _assert_official_shapes(body: dict[str, Any]) -> None:
    """The body as the official client's own types have it: every key one it sends (or SAMPLING), each part of
    its type."""
    allowed = set(message_create_params.MessageCreateParamsStreaming.__annotations__) | SAMPLING
    assert set(body) <= allowed, set(body) - allowed
    pydantic.TypeAdapter(list[MessageParam]).validate_python(body["messages"], strict=True)
    if "tools" in body:
        pydantic.TypeAdapter(list[ToolParam]).validate_python(body["tools"], strict=True)
        pydantic.TypeAdapter(ToolChoiceParam).validate_python(body["tool_choice"], strict=True)


# --- against Anthropic's documented shapes, and the official client ------------------------------------------


def test_a_stream_with_a_call_reads_as_the_official_client_reads_the_same_bytes() -> None:
    script = AnthropicScript(streamed=CALLED)
    with anthropic_server(script) as url:
        official = anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)
        with official.messages.stream(model="claude-test", max_tokens=64,
                                      messages=[{"role": "user", "content": "time?"}]) as streaming:
            final = streaming.get_final_message()
        client_headers = script.headers[-1]
        add_server("claude", url, ServerKind.ANTHROPIC, key=KEY)
        ours = _answer("claude", "claude-test", (ChatMessage("user", "time?"),),
                       shape=AnswerShape(tools=json.dumps(GET_TIME)))
    text = "".join(block.text for block in final.content if block.type == "text")
    [used] = [block for block in final.content if block.type == "tool_use"]
    calls = [d.tool_call for d in ours.deltas if d.tool_call is not None]
    assert ours.error is None and ours.text == text == "Let me look."
    assert calls == [ToolCall(0, used.id, used.name, json.dumps(used.input, separators=(",", ":")))]
    assert ours.done is not None and (ours.done.stats.tokens, ours.done.stats.prompt_tokens) == (
        final.usage.output_tokens, final.usage.input_tokens) == (15, 25)
    assert script.requests[-2:] == ["GET /v1/models?limit=1000", "POST /v1/messages"]
    ours_headers = script.headers[-1]
    assert ours_headers["x-api-key"] == KEY and ours_headers["anthropic-version"] == "2023-06-01"
    assert "anthropic-version" in client_headers  # the official client names its version too
    body = script.bodies[-1]
    _assert_official_shapes(body)
    assert body["tools"] == [{"name": "get_time", "description": "The time now in a zone.",
                              "input_schema": GET_TIME[0]["function"]["parameters"]}]
    assert body["tool_choice"] == {"type": "auto"} and body["stream"] is True and body["max_tokens"] == 64


def test_a_conversation_with_a_call_and_its_result_goes_as_anthropics_alternating_turns() -> None:
    call = ToolCall(0, "toolu_01", "get_time", '{"zone":"UTC"}')
    conversation = (ChatMessage(Role.SYSTEM, "Be brief."), ChatMessage("user", "time?"),
                    ChatMessage(Role.ASSISTANT, "Checking.", tool_calls=(call,)),
                    ChatMessage(Role.TOOL, "12:00", tool_call_id="toolu_01"))
    script = AnthropicScript()
    with anthropic_server(script) as url:
        add_server("claude", url, ServerKind.ANTHROPIC, key=KEY)
        answered = _answer("claude", "claude-test", conversation,
                           GenerationSettings(temperature=1.5, max_tokens=20, top_k=0), AnswerShape(
                               tools=json.dumps(GET_TIME), tool_choice="get_time"), )
    assert answered.error is None and answered.text == "Hello there"
    assert answered.done is not None and answered.done.stats.finish_reason is FinishReason.STOP
    body = script.bodies[-1]
    _assert_official_shapes(body)
    assert body["system"] == "Be brief." and body["temperature"] == 1.0 and "top_k" not in body
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "time?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Checking."},
                                          {"type": "tool_use", "id": "toolu_01", "name": "get_time",
                                           "input": {"zone": "UTC"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "12:00"}]}]
    assert body["tool_choice"] == {"type": "tool", "name": "get_time"}



def test_tools_turned_off_still_go_with_choice_none_beside_earlier_calls() -> None:
    """Anthropic's API refuses tool_use and tool_result blocks in a request that defines no tools."""
    call = ToolCall(0, "toolu_01", "get_time", '{"zone":"UTC"}')
    conversation = (ChatMessage("user", "time?"), ChatMessage(Role.ASSISTANT, "", tool_calls=(call,)),
                    ChatMessage(Role.TOOL, "12:00", tool_call_id="toolu_01"))
    script = AnthropicScript()
    with anthropic_server(script) as url:
        add_server("claude", url, ServerKind.ANTHROPIC, key=KEY)
        answered = _answer("claude", "claude-test", conversation,
                           shape=AnswerShape(tools=json.dumps(GET_TIME), tool_choice="none"))
    assert answered.error is None
    body = script.bodies[-1]
    _assert_official_shapes(body)
    assert body["tool_choice"] == {"type": "none"} and [t["name"] for t in body["tools"]] == ["get_time"]
    assert body["messages"][1] == {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_01", "name": "get_time", "input": {"zone": "UTC"}}]}

def test_a_wrong_key_and_no_key_are_said_in_words_naming_the_server() -> None:
    with anthropic_server(AnthropicScript()) as url:
        add_server("claude", url, ServerKind.ANTHROPIC, key="sk-ant-wrong")
        add_server("keyless", url, ServerKind.ANTHROPIC)
        wrong = _refusal_at_load("claude", "claude-test")
        none = _refusal_at_load("keyless", "claude-test")
    assert wrong.failure.facts.trouble is ServerTrouble.KEY and wrong.failure.facts.status == 401
    assert str(wrong) == (f"claude ({url}) refused the key Kestrel sent (HTTP 401). Set the "
                          'server\'s key again (in the model manager, or with kestrel servers key "claude"), then try '
                          "again.")
    assert str(none).startswith(f"keyless ({url}) wants a key, and none is set for it (HTTP 401)")


def test_a_server_that_is_down_is_said_in_words() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    add_server("gone", url, ServerKind.ANTHROPIC, key=KEY)
    refused = _refusal_at_load("gone", "claude-test")
    assert refused.failure.facts.trouble is ServerTrouble.DOWN
    assert str(refused) == (f"gone ({url}) did not answer: the connection was refused. Is it on, and is its server "
                            "running? Check the address, then try again.")


@pytest.mark.parametrize(("script", "trouble", "said"), [
    (AnthropicScript(overloaded=True), ServerTrouble.SERVER_ERROR, "failed with an error of its own: Overloaded."),
    (AnthropicScript(drop_after=4), ServerTrouble.DROPPED, "stopped answering partway through"),
], ids=["error-event", "dropped"])
def test_a_stream_that_fails_midway_keeps_what_came_and_says_why(script: AnthropicScript, trouble: ServerTrouble,
                                                                   said: str) -> None:
    with anthropic_server(script) as url:
        add_server("claude", url, ServerKind.ANTHROPIC, key=KEY)
        answered = _answer("claude", "claude-test")
    assert answered.text == "Hello" and answered.facts.trouble is trouble
    assert answered.error is not None and said in answered.error.message


# --- a real peer: a second Kestrel's Messages API --------------------------------------------------------------


@pytest.fixture(scope="module")
def peer(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Iterator[KestrelPeer]:
    """Another Kestrel serving the tiny model and the one that calls get_time."""
    from tests.helpers.tool_call_gguf import build_tool_call_gguf

    folder = tmp_path_factory.mktemp("anthropic-peer")
    home = folder / "home"
    paths = DataPaths(home / "data", home / "config", home / "cache", home / "logs").ensure()
    ModelLibrary(paths.models).add_reference(tiny_model)
    with kestrel_peer(home, build_tool_call_gguf(folder / "caller.gguf")) as running:
        yield running


@pytest.mark.slow
def test_a_kestrel_peer_lists_its_models_in_anthropics_shape(peer: KestrelPeer) -> None:
    add_server("peer", peer.url, ServerKind.ANTHROPIC, key=peer.key)
    models = {m.name: m for m in ServerBook.at(data_paths()).models("peer")}
    assert set(models) == {"tiny-model", "caller"} and models["caller"].context_length == 2048


@pytest.mark.slow
def test_tools_round_trip_through_a_kestrel_peers_messages_api(peer: KestrelPeer) -> None:
    add_server("peer", peer.url, ServerKind.ANTHROPIC, key=peer.key)
    question = (ChatMessage("user", "What time is it?"),)
    tools = AnswerShape(tools=json.dumps(GET_TIME))
    called = _answer("peer", "caller", question, GenerationSettings(max_tokens=64), tools)
    calls = [d.tool_call for d in called.deltas if d.tool_call is not None]
    assert called.error is None and [(c.name, c.arguments) for c in calls] == [("get_time", '{"zone":"UTC"}')]
    assert called.text == "Checking."
    answered = (*question, ChatMessage(Role.ASSISTANT, "Checking.", tool_calls=(calls[0],)),
                ChatMessage(Role.TOOL, "12:00 UTC", tool_call_id=calls[0].id))
    again = _answer("peer", "caller", answered, GenerationSettings(max_tokens=64), tools)
    assert again.error is None and again.done is not None  # the peer read the tool_result turn and answered


@pytest.mark.slow
def test_a_chat_through_a_kestrel_peer_gives_the_same_greedy_text_as_the_same_model_here(
        peer: KestrelPeer, tiny_model: Path) -> None:
    add_server("peer", peer.url, ServerKind.ANTHROPIC, key=peer.key)
    hello = (ChatMessage("user", "The capital of France is"),)
    remote = _answer("peer", "tiny-model", hello, GREEDY)

    async def here(client: EngineClient) -> Streamed:
        await client.load(str(tiny_model), context_length=1024)
        return await stream(client, hello, GREEDY)

    local = with_engine(here)
    assert isinstance(local, Streamed) and remote.error is None and remote.done is not None
    assert remote.text == local.text and len(remote.text) > 0
    assert remote.done.stats.finish_reason is FinishReason.LENGTH and remote.done.stats.tokens == 12


@pytest.mark.slow
def test_a_kestrel_peer_refuses_a_wrong_key_in_words(peer: KestrelPeer) -> None:
    add_server("peer", peer.url, ServerKind.ANTHROPIC, key="kestrel-not-the-key")
    refused = _refusal_at_load("peer", "caller")
    facts = refused.failure.facts
    assert facts.trouble is ServerTrouble.KEY and facts.status == 401 and facts.key_sent
    assert str(refused).startswith(f"peer ({peer.url}) refused the key Kestrel sent (HTTP 401)")
