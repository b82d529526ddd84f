"""A call repeated after its result, through the API (issue 37, item 4): Qwen2.5-Coder 0.5B and 1.5B
answered get_weather's result with the same call again, so a client would run it again and again.
A call identical to one the request already holds the result of is not sent; the answer is asked
for once more with no tools and a note after that result, and comes back as text (or as an empty,
well-formed answer when the model still writes none). A new call still comes back as a call.

The official openai and anthropic clients over real HTTP on 127.0.0.1 and the real service core;
the second try's words from the scripted engine, and the repeat itself from real llama.cpp on a
tiny GGUF with Qwen2.5-Coder 1.5B's own template (tests/helpers/doubled_call_gguf.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.engine import protocol as p
from app.service.models.client import EngineClient
from tests.helpers.doubled_call_gguf import build_doubled_call_gguf
from tests.helpers.scripted_answers import Script
from tests.helpers.scripted_engine import ScriptedEngine
from tests.helpers.tiny_gguf import build_tiny_gguf
from tests.helpers.tool_call_gguf import QWEN3_TEMPLATE
from tests.server.helpers import anthropic_client, api_over, loop_thread, openai_client, real_service

ZONE = {"type": "object", "properties": {"zone": {"type": "string"}}}
TIME_TOOL: Any = {"type": "function", "function": {"name": "get_time", "parameters": ZONE}}
ANTHROPIC_TOOL: Any = {"name": "get_time", "input_schema": ZONE}


def _openai_history(zone: str) -> list[Any]:
    return [{"role": "user", "content": "What time is it in UTC?"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
                "name": "get_time", "arguments": json.dumps({"zone": zone})}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "12:00"}]


def _anthropic_history(zone: str) -> list[Any]:
    return [{"role": "user", "content": "What time is it in UTC?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_time",
                                               "input": {"zone": zone}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "12:00"}]}]


def _asked(engine: ScriptedEngine) -> list[p.Generate]:
    return [r for r in engine.requests if isinstance(r, p.Generate)]


# Spaced unlike the request's arguments, and still the same call; its 9 tokens as a model's call would count.
REPEAT = Script(text=(), endless=False, calls=(("get_time", '{"zone": "UTC"}'),), stats={"tokens": 9})
ANSWER = Script(text=("It", " is", " noon", "."), endless=False)


def test_a_repeated_answered_call_becomes_the_text_answer_streamed_or_not_in_both_shapes(tmp_path: Path) -> None:
    qwen = build_tiny_gguf(tmp_path / "qwen.gguf", chat_template=QWEN3_TEMPLATE.read_text(encoding="utf-8"))
    engine = ScriptedEngine()
    with loop_thread() as thread, real_service(thread, qwen, engine) as service, api_over(thread, service) as server:
        model = service.session.model.id
        openai = openai_client(server.address)
        anthropic = anthropic_client(server.address)
        got: dict[str, tuple[str | None, str, bool]] = {}  # each shape's (finish, text, calls sent): all seen
        engine.scripts.extend([REPEAT, ANSWER])
        whole = openai.chat.completions.create(model=model, messages=_openai_history("UTC"), tools=[TIME_TOOL])
        choice = whole.choices[0]
        got["openai"] = (choice.finish_reason, choice.message.content or "", bool(choice.message.tool_calls))
        first, again = _asked(engine)[-2:]

        engine.scripts.extend([REPEAT, ANSWER])
        chunks = list(openai.chat.completions.create(model=model, messages=_openai_history("UTC"), tools=[TIME_TOOL],
                                                     stream=True))
        got["openai stream"] = ([c.choices[0].finish_reason for c in chunks if c.choices][-1],
                                "".join(c.choices[0].delta.content or "" for c in chunks if c.choices),
                                any(c.choices and c.choices[0].delta.tool_calls for c in chunks))

        engine.scripts.extend([REPEAT, ANSWER])
        message = anthropic.messages.create(model=model, max_tokens=40, tools=[ANTHROPIC_TOOL],
                                            messages=_anthropic_history("UTC"))
        got["anthropic"] = (message.stop_reason, "".join(b.text for b in message.content if b.type == "text"),
                            any(b.type == "tool_use" for b in message.content))

        engine.scripts.extend([REPEAT, ANSWER])
        with anthropic.messages.stream(model=model, max_tokens=40, tools=[ANTHROPIC_TOOL],
                                       messages=_anthropic_history("UTC")) as stream:
            streamed = stream.get_final_message()
        got["anthropic stream"] = (streamed.stop_reason, "".join(b.text for b in streamed.content if b.type == "text"),
                                   any(b.type == "tool_use" for b in streamed.content))
        assert got == {"openai": ("stop", "It is noon.", False), "openai stream": ("stop", "It is noon.", False),
                       "anthropic": ("end_turn", "It is noon.", False),
                       "anthropic stream": ("end_turn", "It is noon.", False)}
        assert first.shape.tool_choice == "auto" and again.shape.tool_choice == "none", "no tools the second time"
        note = again.messages[-1]
        assert note.role == "tool" and note.content.startswith("12:00") and "already called" in note.content
        assert first.messages[-1].content == "12:00", "the first try is the request as it came"
        assert whole.usage is not None and whole.usage.completion_tokens == 13, "both tries' tokens are counted"
        assert len(_asked(engine)) == 8, "one second try per request, no more"


def test_a_new_call_comes_back_as_a_call_and_a_second_try_without_words_is_an_empty_answer(tmp_path: Path) -> None:
    qwen = build_tiny_gguf(tmp_path / "qwen.gguf", chat_template=QWEN3_TEMPLATE.read_text(encoding="utf-8"))
    engine = ScriptedEngine()
    with loop_thread() as thread, real_service(thread, qwen, engine) as service, api_over(thread, service) as server:
        model = service.session.model.id
        openai = openai_client(server.address)
        engine.scripts.append(REPEAT)  # get_time UTC, after the result for Asia/Tokyo: a new call
        whole = openai.chat.completions.create(model=model, messages=_openai_history("Asia/Tokyo"), tools=[TIME_TOOL])
        [call] = whole.choices[0].message.tool_calls or []
        assert whole.choices[0].finish_reason == "tool_calls" and json.loads(call.function.arguments) == {"zone": "UTC"}
        engine.scripts.append(REPEAT)
        chunks = list(openai.chat.completions.create(model=model, messages=_openai_history("Asia/Tokyo"),
                                                     tools=[TIME_TOOL], stream=True))
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
        engine.scripts.append(REPEAT)
        message = anthropic_client(server.address).messages.create(
            model=model, max_tokens=40, tools=[ANTHROPIC_TOOL], messages=_anthropic_history("Asia/Tokyo"))
        assert message.stop_reason == "tool_use"
        assert [(b.name, b.input) for b in message.content if b.type == "tool_use"] == [("get_time", {"zone": "UTC"})]
        assert len(_asked(engine)) == 3, "a new call is not asked for again"

        engine.scripts.extend([REPEAT, Script(text=(), endless=False)])  # the second try writes nothing
        empty = openai.chat.completions.create(model=model, messages=_openai_history("UTC"), tools=[TIME_TOOL])
        assert (empty.choices[0].finish_reason, empty.choices[0].message.content or "") == ("stop", "")
        assert not empty.choices[0].message.tool_calls and len(_asked(engine)) == 5


def test_real_llama_cpp_a_repeat_is_not_sent_again_nor_copied_as_text_and_a_new_call_is(tmp_path: Path) -> None:
    # The tiny model writes {{"name": "get_time", "arguments": {"zone": "UTC"}}} whatever it is given;
    # the second try has no tools, so its copy is text, which must not reach the client either.
    model_file = build_doubled_call_gguf(tmp_path / "qwen25 doubled.gguf")
    with loop_thread() as thread, real_service(thread, model_file, EngineClient()) as service, \
            api_over(thread, service) as server:
        model = service.session.model.id
        openai = openai_client(server.address)
        whole = openai.chat.completions.create(model=model, messages=_openai_history("UTC"), tools=[TIME_TOOL],
                                               max_tokens=40).choices[0]
        chunks = list(openai.chat.completions.create(model=model, messages=_openai_history("UTC"), tools=[TIME_TOOL],
                                                     max_tokens=40, stream=True))
        message = anthropic_client(server.address).messages.create(
            model=model, max_tokens=40, tools=[ANTHROPIC_TOOL], messages=_anthropic_history("UTC"))
        got = {"openai": (whole.finish_reason, whole.message.content or "", bool(whole.message.tool_calls)),
               "openai stream": ([c.choices[0].finish_reason for c in chunks if c.choices][-1],
                                 "".join(c.choices[0].delta.content or "" for c in chunks if c.choices),
                                 any(c.choices and c.choices[0].delta.tool_calls for c in chunks)),
               "anthropic": (message.stop_reason, "".join(b.text for b in message.content if b.type == "text"),
                             any(b.type == "tool_use" for b in message.content))}
        assert got == {"openai": ("stop", "", False), "openai stream": ("stop", "", False),
                       "anthropic": ("end_turn", "", False)}
        new = openai.chat.completions.create(model=model, messages=_openai_history("Asia/Tokyo"), tools=[TIME_TOOL],
                                             max_tokens=40).choices[0]
        assert new.finish_reason == "tool_calls"
        assert [(c.function.name, json.loads(c.function.arguments)) for c in new.message.tool_calls or []] == \
            [("get_time", {"zone": "UTC"})]
