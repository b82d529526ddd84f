"""Remote models on real peers on 127.0.0.1, through the real engine process: llama-cpp-python's own server as an
OpenAI-compatible server, and a second `kestrel serve` spoken to as an Ollama server and as another Kestrel."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core.answer_stats import FinishReason
from app.core.conversation import Role
from app.core.generation import GenerationSettings
from app.core.paths import data_paths
from app.engine.protocol import AnswerShape, ChatMessage, ToolCall
from app.library.servers.book import ServerBook
from app.library.servers.faults import ServerTrouble
from app.library.servers.records import ModelAbility, ServerKind
from app.service.models.client import EngineClient
from tests.helpers.remote_answers import Streamed, add_server, load, stream, with_engine
from tests.helpers.remote_peers import KestrelPeer, kestrel_peer, llama_cpp_server
from tests.helpers.tool_call_gguf import CALL_JSON, build_tool_call_gguf

GET_TIME = [{"type": "function", "function": {"name": "get_time", "description": "The time now in a zone.",
                                              "parameters": {"type": "object", "properties": {"zone": {"type": "string"}},
                                                             "required": ["zone"]}}}]
GREEDY = GenerationSettings(temperature=0.0, max_tokens=12)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def llama_server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-cpp-python's server on the tiny model, with its function-calling chat format (tools)."""
    with llama_cpp_server(tiny_model, tmp_path_factory.mktemp("llama-server") / "server.log",
                          chat_format="chatml-function-calling") as url:
        yield url


@pytest.fixture(scope="module")
def peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KestrelPeer]:
    """Another Kestrel serving the tiny model that calls get_time."""
    folder = tmp_path_factory.mktemp("peer")
    with kestrel_peer(folder / "home", build_tool_call_gguf(folder / "caller.gguf")) as running:
        yield running


def _run(server: str, model: str, *answers: tuple[tuple[ChatMessage, ...], GenerationSettings, AnswerShape | None]
         ) -> list[Streamed]:
    async def work(client: EngineClient) -> list[Streamed]:
        refused = await load(client, server, model)
        assert refused is None, refused
        return [await stream(client, messages, settings, shape) for messages, settings, shape in answers]

    result = with_engine(work)
    assert isinstance(result, list)
    return result


def test_llama_cpp_servers_models_are_listed(llama_server: str) -> None:
    add_server("llama", llama_server, ServerKind.OPENAI)
    models = ServerBook.at(data_paths()).models("llama")
    assert [m.id for m in models] == ["llama/tiny"]


def test_a_chat_streams_from_llama_cpp_server_to_its_token_limit(llama_server: str) -> None:
    add_server("llama", llama_server, ServerKind.OPENAI)
    [answer] = _run("llama", "tiny", ((ChatMessage("user", "Hello"),), GREEDY, None))
    assert answer.error is None and answer.done is not None and answer.text
    stats = answer.done.stats
    assert stats.finish_reason is FinishReason.LENGTH and stats.tokens == len(answer.deltas) == 12
    assert stats.device.startswith("llama (127.0.0.1:") and stats.tokens_per_s > 0


def test_a_raw_prompt_gives_the_same_greedy_text_as_the_same_model_run_here(llama_server: str,
                                                                            tiny_model: Path) -> None:
    add_server("llama", llama_server, ServerKind.OPENAI)
    shape = AnswerShape(prompt="The capital of France is")
    [remote] = _run("llama", "tiny", ((), GREEDY, shape))

    async def here(client: EngineClient) -> Streamed:
        await client.load(str(tiny_model), context_length=1024)
        return await stream(client, (), GREEDY, shape)

    local = with_engine(here)
    assert isinstance(local, Streamed) and remote.error is None
    assert remote.text == local.text and len(remote.text) > 0


def test_a_forced_call_comes_back_as_a_call_and_its_result_goes_back(llama_server: str) -> None:
    """llama-cpp-python's server streams a call only when one is forced (tool_choice: a name); the round's answer
    is then asked with the result and no tools (it refuses "auto" while streaming: its own limit)."""
    add_server("llama", llama_server, ServerKind.OPENAI)
    question = (ChatMessage("user", "What time is it in UTC?"),)
    forced = AnswerShape(tools=json.dumps(GET_TIME), tool_choice="get_time")
    [called] = _run("llama", "tiny", (question, GenerationSettings(temperature=0.0, max_tokens=200), forced))
    calls = [d.tool_call for d in called.deltas if d.tool_call is not None]
    assert called.error is None and [c.name for c in calls] == ["get_time"] and calls[0].id
    answered = (*question, ChatMessage(Role.ASSISTANT, "", tool_calls=(calls[0],)),
                ChatMessage(Role.TOOL, "12:00", tool_call_id=calls[0].id))
    [after] = _run("llama", "tiny", (answered, GREEDY, AnswerShape(tools=json.dumps(GET_TIME), tool_choice="none")))
    assert after.error is None and after.done is not None and after.text


def test_a_kestrel_peer_lists_its_model_as_an_ollama_server_with_context_and_abilities(peer: KestrelPeer) -> None:
    add_server("peer", peer.url, ServerKind.OLLAMA, key=peer.key)
    [model] = ServerBook.at(data_paths()).models("peer")
    assert model.id == "peer/caller" and model.context_length == 2048
    assert model.abilities_known and ModelAbility.TOOLS in model.abilities


def test_tools_round_trip_through_a_kestrel_peers_ollama_api(peer: KestrelPeer) -> None:
    add_server("peer", peer.url, ServerKind.OLLAMA, key=peer.key)
    question = (ChatMessage("user", "What time is it?"),)
    tools = AnswerShape(tools=json.dumps(GET_TIME))
    [called] = _run("peer", "caller", (question, GenerationSettings(max_tokens=64), tools))
    calls = [d.tool_call for d in called.deltas if d.tool_call is not None]
    assert called.error is None and [(c.name, c.arguments) for c in calls] == [("get_time", '{"zone":"UTC"}')]
    assert called.text == "Checking."
    call = calls[0]
    answered = (*question, ChatMessage(Role.ASSISTANT, "Checking.", tool_calls=(call,)),
                ChatMessage(Role.TOOL, "12:00 UTC", tool_call_id=call.id))
    [again] = _run("peer", "caller", (answered, GenerationSettings(max_tokens=64), tools))
    assert again.error is None and again.done is not None  # the peer read the result turn and answered


def test_a_kestrel_peer_spoken_to_as_another_kestrel_reads_the_call_as_openai_sends_it(peer: KestrelPeer) -> None:
    add_server("link", peer.url, ServerKind.KESTREL, key=peer.key)
    [called] = _run("link", "caller", ((ChatMessage("user", "time?"),), GenerationSettings(max_tokens=64),
                                       AnswerShape(tools=json.dumps(GET_TIME))))
    calls = [d.tool_call for d in called.deltas if d.tool_call is not None]
    assert called.error is None and calls == [ToolCall(0, calls[0].id, "get_time", '{"zone":"UTC"}')]
    assert json.loads(CALL_JSON)["arguments"] == json.loads(calls[0].arguments)


def test_a_kestrel_peer_refuses_a_wrong_key_in_words(peer: KestrelPeer) -> None:
    add_server("peer", peer.url, ServerKind.OLLAMA, key="kestrel-not-the-key")

    async def work(client: EngineClient) -> object:
        return await load(client, "peer", "caller")

    refused = with_engine(work)
    facts = refused.failure.facts  # type: ignore[union-attr]
    assert facts.trouble is ServerTrouble.KEY and facts.status == 401 and facts.key_sent
    assert str(refused).startswith(f"peer ({peer.url}) refused the key Kestrel sent (HTTP 401).")


def test_a_model_the_peer_does_not_have_is_said_gone(peer: KestrelPeer) -> None:
    add_server("peer", peer.url, ServerKind.OLLAMA, key=peer.key)

    async def work(client: EngineClient) -> object:
        return await load(client, "peer", "no-such-model")

    refused = with_engine(work)
    assert refused.failure.facts.trouble is ServerTrouble.MODEL_GONE  # type: ignore[union-attr]
