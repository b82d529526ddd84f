"""After tools, through the API (issue 37, item 4): a call Qwen2.5 writes in doubled braces comes
back as tool_calls / tool_use with both official clients, and an answer the model leaves empty
after a tool's result stays empty (no words invented for the model) in a well-formed response.

Real llama.cpp on a tiny GGUF with Qwen2.5-Coder 1.5B's own template (tests/helpers/doubled_call_gguf.py),
real HTTP on 127.0.0.1, the real service core; the empty answer comes from the scripted engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.service.models.client import EngineClient
from tests.helpers.doubled_call_gguf import build_doubled_call_gguf
from tests.helpers.scripted_answers import Script
from tests.helpers.scripted_engine import ScriptedEngine
from tests.helpers.tool_call_gguf import QWEN3_TEMPLATE
from tests.helpers.tiny_gguf import build_tiny_gguf
from tests.server.helpers import anthropic_client, api_over, loop_thread, openai_client, real_service

HELLO: list[Any] = [{"role": "user", "content": "What time is it in UTC?"}]
ZONE = {"type": "object", "properties": {"zone": {"type": "string"}}}
TIME_TOOL: Any = {"type": "function", "function": {"name": "get_time", "parameters": ZONE}}


def test_a_doubled_brace_call_comes_back_as_a_call_through_both_clients(tmp_path: Path) -> None:
    model = build_doubled_call_gguf(tmp_path / "qwen25 doubled.gguf")
    with loop_thread() as thread, real_service(thread, model, EngineClient()) as service, \
            api_over(thread, service) as server:
        openai = openai_client(server.address)
        whole = openai.chat.completions.create(model=service.session.model.id, messages=HELLO, tools=[TIME_TOOL],
                                               max_tokens=40).choices[0]
        with openai.chat.completions.stream(model=service.session.model.id, messages=HELLO, tools=[TIME_TOOL],
                                            max_tokens=40) as stream:
            for _ in stream:
                pass
            streamed = stream.get_final_completion().choices[0]
        for choice in (whole, streamed):
            assert choice.finish_reason == "tool_calls" and not (choice.message.content or "").strip()
            [call] = choice.message.tool_calls or []
            assert (call.function.name, json.loads(call.function.arguments)) == ("get_time", {"zone": "UTC"})
            assert call.id.startswith("call_") and call.type == "function"
        message = anthropic_client(server.address).messages.create(
            model=service.session.model.id, max_tokens=40, messages=HELLO,
            tools=[{"name": "get_time", "input_schema": ZONE}])  # type: ignore[typeddict-item]
        assert message.stop_reason == "tool_use"
        assert [(b.name, b.input) for b in message.content if b.type == "tool_use"] == [("get_time", {"zone": "UTC"})]
        assert not any(b.type == "text" and "{{" in b.text for b in message.content)


def test_an_empty_answer_after_a_tool_result_is_a_well_formed_empty_answer(tmp_path: Path) -> None:
    qwen = build_tiny_gguf(tmp_path / "qwen.gguf", chat_template=QWEN3_TEMPLATE.read_text(encoding="utf-8"))
    engine = ScriptedEngine()
    engine.default_script = Script(text=(), endless=False)  # the model ends at once: 0 tokens
    after_tool: list[Any] = [*HELLO, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": '{"zone":"UTC"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "12:00 UTC"}]
    with loop_thread() as thread, real_service(thread, qwen, engine) as service, \
            api_over(thread, service) as server:
        openai = openai_client(server.address)
        whole = openai.chat.completions.create(model=service.session.model.id, messages=after_tool,
                                               tools=[TIME_TOOL])
        choice = whole.choices[0]
        assert choice.finish_reason == "stop" and choice.message.role == "assistant"
        assert (choice.message.content or "") == "" and not choice.message.tool_calls
        chunks = list(openai.chat.completions.create(model=service.session.model.id, messages=after_tool,
                                                     tools=[TIME_TOOL], stream=True))
        assert chunks[-1].choices[0].finish_reason == "stop"
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ""
        message = anthropic_client(server.address).messages.create(
            model=service.session.model.id, max_tokens=40, tools=[{"name": "get_time", "input_schema": ZONE}],
            messages=[HELLO[0], {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "get_time", "input": {"zone": "UTC"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                              "content": "12:00 UTC"}]}])  # type: ignore[typeddict-item]
        assert message.stop_reason == "end_turn" and message.role == "assistant"
        assert all(block.type == "text" and block.text == "" for block in message.content)
