"""The API server end to end: the official openai and anthropic clients over real sockets on
127.0.0.1, the real service core, and the scripted engine (or real llama.cpp on the tiny model)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import threading
from pathlib import Path

import jsonschema
import openai
import pytest

from app.engine import protocol as p
from app.service.models.client import EngineClient
from tests.helpers.scripted_answers import Script
from tests.helpers.scripted_engine import ScriptedEngine
from tests.helpers.tiny_gguf import build_tiny_gguf
from tests.helpers.tool_call_gguf import QWEN3_TEMPLATE, TEXT as CALLER_TEXT, build_tool_call_gguf
from tests.server.helpers import anthropic_client, api_over, chat_entries, loop_thread, openai_client, real_service, until

HELLO = [{"role": "user", "content": "Hello"}]
WEATHER = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                             "parameters": {"type": "object",
                                                            "properties": {"city": {"type": "string"}},
                                                            "required": ["city"]}}}]




class CountingEngine(ScriptedEngine):
    """A scripted engine that counts the tokens it made, as the engine's own report would."""

    def __init__(self, token_s: float) -> None:
        super().__init__(token_s=token_s)
        self.tokens = 0

    async def generate(self, *args: object, **kwargs: object):  # type: ignore[no-untyped-def,override]
        async for event in super().generate(*args, **kwargs):  # type: ignore[arg-type]
            if isinstance(event, p.Delta):
                self.tokens += 1
            yield event


def test_models_chat_stop_max_tokens_and_usage_through_the_openai_client(tiny_model: Path) -> None:
    engine = ScriptedEngine()
    engine.default_script = Script(text=("Kestrels", " hover", " here", ".", " END", " more"), endless=False)
    with loop_thread() as thread, real_service(thread, tiny_model, engine) as service, \
            api_over(thread, service) as server:
        client = openai_client(server.address)
        models = client.models.list().data
        assert [m.id for m in chat_entries(models)] == [service.session.model.id]  # first; the speech ones after
        assert models[0].model_extra == {"name": service.session.model.title, "context_length": models[0].context_length,
                                         "format": "gguf", "loaded": True, "vision": False} and models[0].context_length > 0
        whole = client.chat.completions.create(model=service.session.model.id, messages=HELLO, temperature=0.0)
        assert whole.choices[0].message.content == "Kestrels hover here. END more"
        assert whole.choices[0].finish_reason == "stop" and whole.model == service.session.model.id
        assert whole.usage is not None and whole.usage.completion_tokens == 6 and whole.usage.prompt_tokens > 0
        client.chat.completions.create(model="", messages=HELLO, stop=[" END", "###"])
        generate = engine.requests[-1]
        assert isinstance(generate, p.Generate) and generate.stop == (" END", "###")  # the engine cuts there
        short = client.chat.completions.create(messages=HELLO, max_tokens=2, model=service.session.model.id)
        assert short.choices[0].message.content == "Kestrels hover" and short.choices[0].finish_reason == "length"
        assert short.usage is not None and short.usage.completion_tokens == 2
        generate = engine.requests[-1]
        assert isinstance(generate, p.Generate) and generate.settings.max_tokens == 2
        thread.call(until(lambda: len(service.api.recent_requests) == 4, "four requests logged"))
        assert [r.status for r in service.api.recent_requests] == [200] * 4
        assert service.api.recent_requests[-1].completion_tokens == 2


def test_streaming_chat_completions_and_responses(tiny_model: Path) -> None:
    engine = ScriptedEngine()
    engine.default_script = Script(text=("One", " two", " three"), endless=False)
    with loop_thread() as thread, real_service(thread, tiny_model, engine) as service, \
            api_over(thread, service) as server:
        client = openai_client(server.address)
        chunks = list(client.chat.completions.create(model=service.session.model.id, messages=HELLO, stream=True,
                                                     stream_options={"include_usage": True}))
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "One two three"
        assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 3
        completion = client.completions.create(model=service.session.model.id, prompt="Once upon a time")
        assert completion.choices[0].text == "One two three"
        generate = engine.requests[-1]
        assert isinstance(generate, p.Generate) and generate.shape.prompt == "Once upon a time"
        response = client.responses.create(model=service.session.model.id, instructions="Be brief.", input="Hi",
                                           max_output_tokens=50)
        assert response.output_text == "One two three" and response.status == "completed"
        assert response.usage is not None and response.usage.output_tokens == 3
        events = list(client.responses.create(model=service.session.model.id, input="Hi", stream=True))
        assert events[0].type == "response.created" and events[-1].type == "response.completed"
        assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "One two three"


def test_anthropic_messages_whole_and_streamed(tiny_model: Path) -> None:
    engine = ScriptedEngine()
    engine.default_script = Script(text=("Bonjour", " le", " monde"), endless=False)
    with loop_thread() as thread, real_service(thread, tiny_model, engine) as service, \
            api_over(thread, service) as server:
        client = anthropic_client(server.address)
        message = client.messages.create(model=service.session.model.id, max_tokens=50, system="Be brief.",
                                         messages=HELLO, stop_sequences=["###"])
        assert message.content[0].type == "text" and message.content[0].text == "Bonjour le monde"
        assert message.stop_reason == "end_turn" and message.usage.output_tokens == 3
        generate = engine.requests[-1]
        assert isinstance(generate, p.Generate) and generate.stop == ("###",)
        assert [m.role.value for m in generate.messages] == ["system", "user"]
        with client.messages.stream(model=service.session.model.id, max_tokens=2, messages=HELLO) as stream:
            streamed = "".join(stream.text_stream)
            final = stream.get_final_message()
        assert streamed == "Bonjour le" and final.stop_reason == "max_tokens" and final.usage.output_tokens == 2


def test_a_tool_call_round_trip_streamed_and_not(tmp_path: Path) -> None:
    """Scripted calls on a model whose (Qwen3) template takes tools."""
    qwen = build_tiny_gguf(tmp_path / "qwen.gguf", chat_template=QWEN3_TEMPLATE.read_text(encoding="utf-8"))
    engine = ScriptedEngine()
    with loop_thread() as thread, real_service(thread, qwen, engine) as service, \
            api_over(thread, service) as server:
        client = openai_client(server.address)
        for stream in (False, True):
            engine.scripts.append(Script(text=(), calls=(("get_weather", '{"city":"Paris"}'),),
                                         endless=False))
            if stream:
                with client.chat.completions.stream(model=service.session.model.id, messages=HELLO, tools=WEATHER) as s:
                    for _ in s:
                        pass
                    choice = s.get_final_completion().choices[0]
            else:
                choice = client.chat.completions.create(model=service.session.model.id, messages=HELLO,
                                                        tools=WEATHER).choices[0]  # type: ignore[arg-type]
            assert choice.finish_reason == "tool_calls"
            call = (choice.message.tool_calls or [])[0]
            assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
            engine.scripts.append(Script(text=("Sunny", " in", " Paris."), endless=False))
            after = client.chat.completions.create(model=service.session.model.id, tools=WEATHER, messages=[  # type: ignore[arg-type]
                *HELLO, {"role": "assistant", "content": None, "tool_calls": [
                    {"id": call.id, "type": "function",
                     "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
                {"role": "tool", "tool_call_id": call.id, "content": "22 C, sunny"}])
            assert after.choices[0].message.content == "Sunny in Paris."
            generate = engine.requests[-1]
            assert isinstance(generate, p.Generate) and generate.messages[-1].tool_call_id == call.id
            assert generate.messages[-2].tool_calls[0].name == "get_weather"
            assert json.loads(generate.shape.tools or "") == WEATHER


def test_a_context_too_long_is_refused_with_both_numbers(tiny_model: Path) -> None:
    with loop_thread() as thread, real_service(thread, tiny_model) as service, \
            api_over(thread, service) as server:
        with pytest.raises(openai.BadRequestError) as refused:
            openai_client(server.address).chat.completions.create(
                model=service.session.model.id, messages=[{"role": "user", "content": "word " * 40_000}])
        message = refused.value.message
        numbers = [int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*", message)]
        assert len([n for n in numbers if n >= 256]) >= 2, message


def test_two_streaming_clients_get_whole_separate_answers_and_one_beyond_the_limit_gets_503(
        tiny_model: Path) -> None:
    # Long enough (40 tokens, 1.6 s) that the first still runs when the third request comes.
    engine = ScriptedEngine(token_s=0.04)
    engine.scripts.extend([Script(text=tuple(f" a{i}" for i in range(40)), endless=False),
                           Script(text=tuple(f" b{i}" for i in range(40)), endless=False)])
    engine.default_script = Script(text=("late",), endless=False)
    with loop_thread() as thread, real_service(thread, tiny_model, engine) as service:
        thread.call(service.update_settings(dataclasses.replace(
            service.keeper.settings, server=dataclasses.replace(service.keeper.settings.server, max_waiting=1))))
        with api_over(thread, service) as server:
            client = openai_client(server.address)
            texts: dict[str, str] = {}
            streaming = {"first": threading.Event(), "second": threading.Event()}

            def read(name: str) -> None:
                pieces = []
                for chunk in client.chat.completions.create(model=service.session.model.id, messages=HELLO, stream=True,
                                                            max_tokens=100):
                    streaming[name].set()
                    pieces.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
                texts[name] = "".join(pieces)

            first = threading.Thread(target=read, args=("first",))
            first.start()
            assert streaming["first"].wait(30)
            second = threading.Thread(target=read, args=("second",))
            second.start()
            thread.call(until(lambda: service.api._waiting == 1, "the second waiting"))  # noqa: SLF001
            with pytest.raises(openai.APIStatusError) as busy:
                client.chat.completions.create(model=service.session.model.id, messages=HELLO)
            assert busy.value.status_code == 503 and busy.value.response.headers["retry-after"]
            first.join(60)
            second.join(60)
    assert sorted(texts.values()) == ["".join(f" a{i}" for i in range(40)), "".join(f" b{i}" for i in range(40))]


def test_a_client_that_disconnects_mid_stream_stops_the_engine_within_a_few_tokens(tiny_model: Path) -> None:
    engine = CountingEngine(token_s=0.02)
    engine.default_script = Script()  # endless: only max_tokens would end it
    with loop_thread() as thread, real_service(thread, tiny_model, engine) as service, \
            api_over(thread, service) as server:
        stream = openai_client(server.address).chat.completions.create(
            model=service.session.model.id, messages=HELLO, stream=True, max_tokens=100_000)
        read = 0
        for _ in stream:
            read += 1
            if read == 4:
                break
        stream.close()
        thread.call(until(lambda: not service.api.busy, "the answer to end"))
        made = engine.tokens
        thread.call(asyncio.sleep(0.3))  # 15 tokens' time
        assert engine.tokens == made, "the engine went on after the answer ended"
        assert made < read + 10, f"the engine made {made} tokens for a client that read {read}"
        thread.call(until(lambda: len(service.api.recent_requests) == 1, "the request logged"))
        assert service.api.recent_requests[0].status == 499


def test_real_answers_on_the_tiny_model_stream_stop_and_end_at_max_tokens(tiny_model: Path) -> None:
    with loop_thread() as thread, real_service(thread, tiny_model, EngineClient()) as service, \
            api_over(thread, service) as server:
        client = openai_client(server.address)
        asked = {"model": service.session.model.id, "messages": HELLO, "temperature": 0.0, "seed": 1}
        whole = client.chat.completions.create(**asked, max_tokens=12)  # type: ignore[call-overload]
        text = whole.choices[0].message.content or ""
        assert whole.usage is not None and whole.usage.completion_tokens == 12 and whole.usage.prompt_tokens > 0
        assert whole.choices[0].finish_reason == "length"
        chunks = list(client.chat.completions.create(**asked, max_tokens=12, stream=True))  # type: ignore[call-overload]
        assert "".join(c.choices[0].delta.content or "" for c in chunks) == text
        assert chunks[-1].choices[0].finish_reason == "length"
        cut = text[len(text) // 2:][:3]  # a piece from the middle of the answer
        assert cut.strip(), text
        stopped = client.chat.completions.create(**asked, max_tokens=12, stop=[cut])  # type: ignore[call-overload]
        assert stopped.choices[0].message.content == text[:text.index(cut)]
        assert stopped.choices[0].finish_reason == "stop"


def test_json_schema_output_validates_on_the_tiny_model(tiny_model: Path) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer"}},
              "required": ["ok", "n"], "additionalProperties": False}
    with loop_thread() as thread, real_service(thread, tiny_model, EngineClient()) as service, \
            api_over(thread, service) as server:
        client = openai_client(server.address)
        answer = client.chat.completions.create(
            model=service.session.model.id, messages=HELLO, max_tokens=200, temperature=0.0,
            response_format={"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}})
        jsonschema.validate(json.loads(answer.choices[0].message.content or ""), schema)


def test_a_real_tool_call_through_both_clients(tmp_path: Path) -> None:
    """llama.cpp on a tiny GGUF whose weights write one Qwen-style call (tests/helpers/tool_call_gguf.py)."""
    caller = build_tool_call_gguf(tmp_path / "caller.gguf")
    time_tool = {"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"zone": {"type": "string"}}}}}
    with loop_thread() as thread, real_service(thread, caller, EngineClient()) as service, \
            api_over(thread, service) as server:
        with openai_client(server.address).chat.completions.stream(
                model=service.session.model.id, messages=HELLO, tools=[time_tool], max_tokens=40) as stream:  # type: ignore[list-item]
            for _ in stream:
                pass
            choice = stream.get_final_completion().choices[0]
        assert choice.finish_reason == "tool_calls" and (choice.message.content or "").strip() == CALLER_TEXT
        call = (choice.message.tool_calls or [])[0]
        assert (call.function.name, json.loads(call.function.arguments)) == ("get_time", {"zone": "UTC"})
        message = anthropic_client(server.address).messages.create(
            model=service.session.model.id, max_tokens=40, messages=HELLO,
            tools=[{"name": "get_time", "input_schema": time_tool["function"]["parameters"]}])  # type: ignore[index]
        assert message.stop_reason == "tool_use"
        used = [block for block in message.content if block.type == "tool_use"]
        assert [(b.name, b.input) for b in used] == [("get_time", {"zone": "UTC"})]


@pytest.mark.starter
def test_the_starter_model_answers_through_the_openai_client(small_real_model: Path) -> None:
    with loop_thread() as thread, real_service(thread, small_real_model, EngineClient()) as service, \
            api_over(thread, service) as server:
        answer = openai_client(server.address).chat.completions.create(
            model=service.session.model.id, messages=[{"role": "user", "content": "Say hello."}], max_tokens=16)
        streamed = "".join(event.delta for event in openai_client(server.address).responses.create(
            model=service.session.model.id, input="Say hello.", max_output_tokens=16, stream=True)
            if event.type == "response.output_text.delta")
    assert (answer.choices[0].message.content or "").strip() and streamed.strip()
    assert answer.usage is not None and 0 < answer.usage.completion_tokens <= 16
