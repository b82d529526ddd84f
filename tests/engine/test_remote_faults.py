"""A remote model through the real engine process against a hostile server on 127.0.0.1: each fault ends the answer
with facts that name the server and words that say what to do; what was streamed before a drop stays; Stop hangs up."""

from __future__ import annotations

import asyncio

import pytest

from app.core.answer_stats import FinishReason
from app.core.generation import GenerationSettings
from app.engine.failure_words import WINDOW, describe
from app.engine.protocol import Delta
from app.library.servers.faults import ServerTrouble
from app.library.servers.records import ServerKind
from app.service.models.client import EngineClient
from tests.helpers.hostile_server import Script, hostile_server
from tests.helpers.remote_answers import Streamed, add_server, load, stream, with_engine
from tests.helpers.remote_peers import closed_port


def _answer_once(name: str, model: str = "m", script: Script | None = None) -> Streamed:
    async def work(client: EngineClient) -> Streamed:
        refused = await load(client, name, model)
        assert refused is None, refused
        return await stream(client)

    result = with_engine(work)
    assert isinstance(result, Streamed)
    return result


def test_an_openai_stream_comes_through_with_the_servers_counts_and_the_request_it_was_sent() -> None:
    script = Script(words=["Hello", " from", " afar"])
    with hostile_server(script) as url:
        add_server("far", url, ServerKind.OPENAI, key="sk-far")
        streamed = _answer_once("far")
    assert streamed.text == "Hello from afar" and streamed.done is not None
    stats = streamed.done.stats
    assert (stats.tokens, stats.prompt_tokens, stats.finish_reason) == (3, 7, FinishReason.STOP)
    assert stats.device == f"far ({url.removeprefix('http://')})" and stats.threads == 0
    body = script.bodies[-1]
    assert body["model"] == "m" and body["stream"] is True and body["messages"] == [
        {"role": "user", "content": "hello there"}]
    assert script.keys[-1] == "Bearer sk-far"  # the key from the file the engine process read itself
    assert script.requests == ["GET /v1/models", "POST /v1/chat/completions"]


def test_an_ollama_stream_comes_through_with_its_eval_counts_and_its_options() -> None:
    script = Script(ollama=True, words=["Hi", " there"])
    with hostile_server(script) as url:
        add_server("box", url, ServerKind.OLLAMA)
        streamed = _answer_once("box")
    assert streamed.text == "Hi there" and streamed.done is not None
    assert streamed.done.stats.tokens == 2 and streamed.done.stats.tokens_per_s == 100.0  # 2 in 20 ms, as it said
    options = script.bodies[-1]["options"]
    assert options["num_predict"] == 64 and options["num_ctx"] == 4096  # the chat's context, under its 8,192
    assert script.keys[-1] is None  # no key was set: none is sent


def test_a_server_error_ends_the_answer_with_its_own_message() -> None:
    script = Script(status=500, error="CUDA out of memory")
    with hostile_server(script) as url:
        add_server("gpu-box", url, ServerKind.OPENAI)
        streamed = _answer_once("gpu-box")
    assert streamed.facts.trouble is ServerTrouble.SERVER_ERROR and streamed.facts.status == 500
    assert streamed.error is not None and streamed.error.message == (
        f"gpu-box ({url}) failed with an error of its own (HTTP 500): CUDA out of memory. Look at the server's log, "
        "then try again.")


@pytest.mark.parametrize("ollama", [False, True], ids=["openai", "ollama"])
def test_a_stream_dropped_midway_keeps_what_came_and_says_the_connection_closed(ollama: bool) -> None:
    script = Script(ollama=ollama, words=["Hello", " wor", "ld"], drop_after=2)
    with hostile_server(script) as url:
        add_server("flaky", url, ServerKind.OLLAMA if ollama else ServerKind.OPENAI)
        streamed = _answer_once("flaky")
    assert streamed.text == "Hello wor"
    assert streamed.facts.trouble is ServerTrouble.DROPPED
    assert streamed.error is not None and streamed.error.message == (
        f"flaky ({url}) stopped answering partway through: the connection closed. What was written is kept; try "
        "again.")


def test_a_wrong_key_is_refused_at_load_in_words_that_say_to_set_it_again() -> None:
    script = Script(list_status=401)
    with hostile_server(script) as url:
        add_server("locked", url, ServerKind.OPENAI)

        async def work(client: EngineClient) -> object:
            return await load(client, "locked", "m")

        refused = with_engine(work)
    assert refused is not None and describe(refused.failure, WINDOW) == (  # type: ignore[union-attr]
        f"locked ({url}) wants a key, and none is set for it (HTTP 401). Set the server's key again (in the model "
        'manager, or with kestrel servers key "locked"), then try again.')


def test_a_silent_server_is_called_slow_after_its_wait() -> None:
    script = Script(silent=True)
    with hostile_server(script) as url:
        add_server("sleepy", url, ServerKind.OPENAI, wait_s=1)
        streamed = _answer_once("sleepy")
    assert streamed.facts.trouble is ServerTrouble.SLOW and streamed.error is not None
    assert streamed.error.message.startswith(f"sleepy ({url}) did not answer within 1 s.")


@pytest.mark.parametrize("before_its_head", [False, True], ids=["streaming", "before-the-head"])
def test_stop_hangs_up_at_once_even_while_the_server_says_nothing(before_its_head: bool) -> None:
    script = Script(silent=not before_its_head, silent_head=before_its_head)
    with hostile_server(script) as url:
        add_server("sleepy", url, ServerKind.OPENAI, wait_s=600)  # Stop must not wait for this

        async def work(client: EngineClient) -> Streamed:
            assert await load(client, "sleepy", "m") is None
            answer = asyncio.ensure_future(stream(client))
            while "POST /v1/chat/completions" not in script.requests:
                await asyncio.sleep(0.05)
            client.cancel()
            return await answer

        streamed = with_engine(work)
        assert script.hung_up.wait(10)
    assert isinstance(streamed, Streamed) and streamed.done is not None
    assert streamed.done.stats.finish_reason is FinishReason.CANCELLED and streamed.error is None


def test_stop_mid_answer_keeps_what_was_written_and_closes_the_connection() -> None:
    script = Script(words=["tick "], endless=True, delay_s=0.05)
    with hostile_server(script) as url:
        add_server("chatty", url, ServerKind.OPENAI)

        async def work(client: EngineClient) -> Streamed:
            assert await load(client, "chatty", "m") is None

            seen: list[Delta] = []

            def stop_after_three(delta: Delta) -> None:
                seen.append(delta)
                if len(seen) == 3:
                    client.cancel()

            return await stream(client, settings=GenerationSettings(max_tokens=10_000), after_delta=stop_after_three)

        streamed = with_engine(work)
        assert script.hung_up.wait(10)
    assert isinstance(streamed, Streamed) and streamed.done is not None
    assert streamed.done.stats.finish_reason is FinishReason.CANCELLED
    assert streamed.text.startswith("tick tick tick ") and streamed.error is None


def test_a_model_removed_from_the_server_after_loading_is_said_gone() -> None:
    script = Script()
    with hostile_server(script) as url:
        add_server("shelf", url, ServerKind.OPENAI)

        async def work(client: EngineClient) -> Streamed:
            assert await load(client, "shelf", "m") is None
            script.models.clear()
            return await stream(client)

        streamed = with_engine(work)
    assert isinstance(streamed, Streamed) and streamed.facts.trouble is ServerTrouble.MODEL_GONE
    assert streamed.error is not None and 'has no model "m" now' in streamed.error.message


def test_a_server_that_is_off_is_said_not_to_answer() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    add_server("studio-pc", url, ServerKind.OLLAMA)

    async def work(client: EngineClient) -> object:
        return await load(client, "studio-pc", "llama3")

    refused = with_engine(work)
    assert refused is not None and describe(refused.failure, WINDOW) == (  # type: ignore[union-attr]
        f"studio-pc ({url}) did not answer: the connection was refused. Is it on, and is its server running? "
        "Check the address, then try again.")


def test_an_address_naming_a_server_no_one_added_contacts_nothing() -> None:
    script = Script()
    with hostile_server(script):
        async def work(client: EngineClient) -> object:
            return await load(client, "ghost", "m")

        refused = with_engine(work)
    assert refused is not None and 'No server called "ghost" is among the servers you added' in str(refused)
    assert script.requests == []
