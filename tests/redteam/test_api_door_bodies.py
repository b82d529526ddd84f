"""Issue 35, the API server's door (items 11, 17 and 18): malformed JSON is a 400 in the caller's
provider's shape, refusals say numbers as the app writes them, a client that left is logged 499,
and Anthropic's stop_sequence names the stop string that ended the answer.

Real sockets on 127.0.0.1; the answers come from FakeAnswers, or llama.cpp on the tiny model.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.core.answer_stats import AnswerStats, FinishReason
from app.engine.protocol import Delta, Done
from app.server import endpoint
from app.server.errors import BadRequest
from app.server.fields import Body
from app.service.api.api_answers import ApiAsk, Started
from app.service.models.client import EngineClient
from tests.redteam.api_requests import (ANTHROPIC_KEY, CHAT, HELLO, JSON, OPENAI_KEY, anthropic_error, openai_error,
                                        port_of, raw)
from tests.server.helpers import KEY, FakeAnswers, anthropic_client, api_over, loop_thread, real_service, serving, \
    until


# --- item 11: malformed JSON is a 400 in the provider's shape ----------------------------------

def _chat_with(field: bytes) -> bytes:
    return b'{"messages": [{"role": "user", "content": "Hi"}], ' + field + b"}"


DEEP = 100_000
MALFORMED = {
    "100,000 nested arrays": (b"[" * DEEP + b"]" * DEEP, "nested"),
    "100,000 nested objects in a field": (_chat_with(b'"metadata": ' + b'{"a":' * DEEP + b"1" + b"}" * DEEP), "nested"),
    "a 5,000-digit integer": (_chat_with(b'"max_tokens": 1' + b"0" * 4999), "digits"),
    "NaN": (_chat_with(b'"temperature": NaN'), "NaN"),
    "Infinity": (_chat_with(b'"temperature": Infinity'), "Infinity"),
    "-Infinity": (_chat_with(b'"top_p": -Infinity'), "-Infinity"),
    "1e999": (_chat_with(b'"temperature": 1e999'), "1e999"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_json_is_a_400_in_each_providers_shape(case: str, capfd: pytest.CaptureFixture[str]) -> None:
    body, named = MALFORMED[case]
    fake = FakeAnswers()
    with loop_thread() as thread, serving(thread, fake) as server:
        status, reply, _ = raw(server.address, "POST", "/v1/chat/completions",
                               {**OPENAI_KEY, **JSON}, body)
        assert status == 400, reply
        message = openai_error(reply)["message"]
        assert named in message and "JSON" in message, message
        status, reply, _ = raw(server.address, "POST", "/v1/messages", {**ANTHROPIC_KEY, **JSON}, body)
        assert status == 400 and named in anthropic_error(reply)["message"], reply
    assert fake.asks == []
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize("text", ["a\\ud800b", "\\udc00", "ok \\uD83D", "\\ude00\\ud83d"])
def test_a_lone_surrogate_is_a_400_naming_where_it_is(text: str) -> None:
    chat = ('{"messages": [{"role": "user", "content": "' + text + '"}]}').encode()
    messages = ('{"model": "tiny", "max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "text", '
                '"text": "' + text + '"}]}]}').encode()
    fake = FakeAnswers()
    with loop_thread() as thread, serving(thread, fake) as server:
        status, reply, _ = raw(server.address, "POST", "/v1/chat/completions",
                               {**OPENAI_KEY, **JSON}, chat)
        assert status == 400, reply
        error = openai_error(reply)
        assert error["param"] == "messages[0].content" and "surrogate" in error["message"], error
        status, reply, _ = raw(server.address, "POST", "/v1/messages", {**ANTHROPIC_KEY, **JSON}, messages)
        assert status == 400, reply
        assert "messages[0].content[0].text" in anthropic_error(reply)["message"]
    assert fake.asks == []


def test_a_lone_surrogate_never_reaches_the_real_engine(tiny_model: Path) -> None:
    """The issue's case: it answered 500 engine_error; an emoji as an escaped pair still passes."""
    with loop_thread() as thread, real_service(thread, tiny_model, EngineClient()) as service, \
            api_over(thread, service) as server:
        auth = {**OPENAI_KEY, **JSON}
        for text, wanted in (("a\\ud800b", 400), ("a \\ud83d\\ude00 b", 200)):
            body = json.dumps({"model": service.session.model.id, "max_tokens": 4,
                               "messages": [{"role": "user", "content": "@TEXT@"}]}).replace("@TEXT@", text)
            status, reply, _ = raw(server.address, "POST", "/v1/chat/completions", auth, body.encode())
            assert status == wanted, reply


# --- item 17: the words of a few refusals, and the log of a client that left ------------------

def test_a_number_that_is_not_finite_is_named_as_such() -> None:
    for value, said in ((float("nan"), "NaN"), (float("inf"), "an infinite number"),
                        (float("-inf"), "an infinite number")):
        with pytest.raises(BadRequest) as refused:
            Body({"temperature": value}).number("temperature", 0.0, 2.0)
        assert refused.value.message == f"temperature must be a finite number, not {said}.", refused.value.message


def test_a_range_is_written_with_thousands_separators() -> None:
    fake = FakeAnswers()
    with loop_thread() as thread, serving(thread, fake) as server:
        for extra, wanted in (({"context_length": 2_000_000},
                               "context_length must be from 256 to 1,048,576 (got 2,000,000)."),
                              ({"context_length": 10**40}, "context_length must be from 256 to 1,048,576 "
                                                           "(got a number of 41 digits)."),
                              ({"temperature": 2.5}, "temperature must be from 0 to 2 (got 2.5).")):
            status, reply, _ = raw(server.address, "POST", "/v1/chat/completions",
                                   {**OPENAI_KEY, **JSON},
                                   json.dumps({"messages": HELLO, **extra}).encode())
            assert status == 400 and openai_error(reply)["message"] == wanted, reply
    assert fake.asks == []


def _posted_head(length: int) -> bytes:
    return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + KEY.encode()
            + b"\r\nContent-Type: application/json\r\nContent-Length: " + str(length).encode() + b"\r\n\r\n")


def test_a_client_that_leaves_while_its_body_arrives_is_logged_499(capfd: pytest.CaptureFixture[str]) -> None:
    """It was a 500 with a traceback (starlette's ClientDisconnect)."""
    fake = FakeAnswers()
    with loop_thread() as thread, serving(thread, fake) as server:
        with socket.create_connection(("127.0.0.1", port_of(server.address))) as sock:
            sock.sendall(_posted_head(1000) + b'{"mes')
            time.sleep(0.3)
        thread.call(until(lambda: len(fake.records) == 1, "the request logged"))
    assert fake.records[0].status == 499
    assert "Traceback" not in capfd.readouterr().err


def test_a_body_that_stops_arriving_gets_408(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(endpoint, "BODY_PAUSE_S", 1.0)  # 30 s in use
    fake = FakeAnswers()
    with loop_thread() as thread, serving(thread, fake) as server:
        with socket.create_connection(("127.0.0.1", port_of(server.address))) as sock:
            sock.sendall(_posted_head(1000) + b'{"mes')
            sock.settimeout(60)
            reply = b""
            while chunk := sock.recv(65536):
                reply += chunk
        thread.call(until(lambda: len(fake.records) == 1, "the request logged"))
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), reply
    assert openai_error(json.loads(body))["message"] == ("The request body stopped arriving: nothing came for 1 "
                                                         "seconds after 5 bytes. Send the whole body at once.")
    assert fake.asks == [] and fake.records[0].status == 408


class FinishingAnswers(FakeAnswers):
    """An answer that, told to stop, still ends with its Done (as an engine finishing its last
    token does): the request's work ends normally though its client has gone."""

    async def _answer(self, ask: ApiAsk) -> AsyncIterator[Started | Delta | Done]:
        self.asks.append(ask)
        self.started += 1
        yield Started(model="tiny", context_length=1024)
        yield Delta(0, "Hello")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)  # the engine's last token
        yield Done(0, AnswerStats(prompt_tokens=7, tokens=1, finish_reason=FinishReason.CANCELLED))


def test_a_non_streaming_client_that_left_is_logged_499_even_if_its_answer_then_ends() -> None:
    fake = FinishingAnswers()
    with loop_thread() as thread, serving(thread, fake) as server:
        with socket.create_connection(("127.0.0.1", port_of(server.address))) as sock:
            sock.sendall(_posted_head(len(CHAT)) + CHAT)
            thread.call(until(lambda: fake.started == 1, "the answer started"))
        thread.call(until(lambda: len(fake.records) == 1, "the request logged"))
    assert fake.records[0].status == 499


# --- item 18: Anthropic's stop_sequence says which stop string ended the answer -----------------

def test_stop_sequence_names_the_stop_string_whole_and_streamed() -> None:
    fake = FakeAnswers(pieces=("One", " two"), stop_sequence="###")
    with loop_thread() as thread, serving(thread, fake) as server:
        client = anthropic_client(server.address)
        message = client.messages.create(model="tiny", max_tokens=50, messages=HELLO, stop_sequences=["END", "###"])
        assert (message.stop_reason, message.stop_sequence) == ("stop_sequence", "###")
        with client.messages.stream(model="tiny", max_tokens=50, messages=HELLO, stop_sequences=["###"]) as stream:
            events = list(stream)
            final = stream.get_final_message()
        assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", "###")
        [delta] = [event for event in events if event.type == "message_delta"]
        assert (delta.delta.stop_reason, delta.delta.stop_sequence) == ("stop_sequence", "###")
    with loop_thread() as thread, serving(thread, FakeAnswers(pieces=("One",))) as server:
        message = anthropic_client(server.address).messages.create(model="tiny", max_tokens=50, messages=HELLO,
                                                                   stop_sequences=["###"])
        assert (message.stop_reason, message.stop_sequence) == ("end_turn", None)


def test_stop_sequence_on_the_real_engine(tiny_model: Path) -> None:
    with loop_thread() as thread, real_service(thread, tiny_model, EngineClient()) as service, \
            api_over(thread, service) as server:
        client = anthropic_client(server.address)
        asked: dict[str, Any] = {"model": service.session.model.id, "messages": HELLO, "max_tokens": 12,
                                 "extra_body": {"temperature": 0.0, "seed": 1}}
        whole = client.messages.create(**asked)
        text = "".join(block.text for block in whole.content if block.type == "text")
        assert whole.stop_reason == "max_tokens"
        cut = text[len(text) // 2:][:3]
        assert cut.strip(), text
        stopped = client.messages.create(**asked, stop_sequences=["never-said", cut])
        assert "".join(block.text for block in stopped.content if block.type == "text") == text[:text.index(cut)]
        assert (stopped.stop_reason, stopped.stop_sequence) == ("stop_sequence", cut)
        with client.messages.stream(**asked, stop_sequences=[cut]) as stream:
            final = stream.get_final_message()
        assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", cut)
