"""Tool calls are read back from streamed answers per template family, and nothing is lost.

Each answer is fed whole, one character at a time, in pieces of three, and cut in the
middle of every call marker, and must give the same text and calls every way.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any, Callable

import pytest

from app.engine.protocol import ToolCall
from app.engine.tool_calls.tool_calls import NOTE_CUT_OFF, NOTE_INVALID, ToolCallReader, ToolFamily, family_of
from app.library.model_files.gguf_info import read_gguf_info

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ANSWERS = json.loads((FIXTURES / "tool_calls" / "answers.json").read_text(encoding="utf-8"))
RECORDED = json.loads((FIXTURES / "tool_calls" / "qwen2.5-coder-0.5b-recorded.json").read_text(encoding="utf-8"))
MARKERS = ("<tool_call>", "</tool_call>", "```json", "```", "<|python_tag|>", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]",
           "<|tool_call|>", "<|/tool_call|>", "<|tool_call>", "<tool_call|>", "<start_function_call>",
           "<end_function_call>", "<escape>", '<|"|>', "<|channel|>", "<|start|>", "<|message|>", "<|constrain|>",
           "<|call|>", "to=functions.")


def whole(text: str) -> list[str]:
    return [text]


def characters(text: str) -> list[str]:
    return list(text)


def threes(text: str) -> list[str]:
    return [text[i:i + 3] for i in range(0, len(text), 3)]


def inside_markers(text: str) -> list[str]:
    """Pieces cut in the middle of every marker, where a reader must hold a partial marker."""
    cuts = sorted({m.start() + len(marker) // 2 for marker in MARKERS for m in re.finditer(re.escape(marker), text)})
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


SPLITS: dict[str, Callable[[str], list[str]]] = {
    "whole": whole, "characters": characters, "threes": threes, "inside markers": inside_markers}


def read(family: ToolFamily, pieces: list[str], tools: Any = ANSWERS["tools"]) -> list[str | ToolCall]:
    """Everything the reader gives for these pieces, neighbouring text joined."""
    reader = ToolCallReader(family, tools)
    out: list[str | ToolCall] = []
    for piece in pieces:
        out += reader.feed(piece)
    out += reader.finish()
    joined: list[str | ToolCall] = []
    for item in out:
        assert item != "", "the reader gave an empty text"
        if isinstance(item, str) and joined and isinstance(joined[-1], str):
            joined[-1] += item
        else:
            joined.append(item)
    return joined


def plain(items: list[str | ToolCall]) -> list[Any]:
    """Items as the fixtures write them: text, or {"call", "arguments"} (ids and indices checked here)."""
    calls = [item for item in items if isinstance(item, ToolCall)]
    assert [call.index for call in calls] == list(range(len(calls)))
    assert all(re.fullmatch(r"call_[A-Za-z0-9_-]{24}", call.id) for call in calls)
    assert len({call.id for call in calls}) == len(calls)
    return [item if isinstance(item, str) else {"call": item.name, "arguments": json.loads(item.arguments)}
            for item in items]


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("case", ANSWERS["cases"], ids=lambda case: f"{case['family']}: {case['name']}")
def test_answers_in_every_family_read_the_same_however_they_stream(case: dict[str, Any], split: str) -> None:
    assert plain(read(ToolFamily(case["family"]), SPLITS[split](case["text"]))) == case["expect"]


def test_every_family_has_answers_with_calls_and_without() -> None:
    for family in ToolFamily:
        cases = [case for case in ANSWERS["cases"] if case["family"] == family.value]
        assert any(isinstance(item, dict) for case in cases for item in case["expect"]), family
        assert any(all(isinstance(item, str) for item in case["expect"]) for case in cases), family


@pytest.mark.parametrize("split", SPLITS)
def test_what_qwen_really_wrote_is_read(split: str) -> None:
    """Qwen2.5-Coder 0.5B answers with a fenced call object; code and greetings stay text."""
    names = [tool["function"]["name"] for tool in RECORDED["tools"]]
    outputs = {name: plain(read(ToolFamily.HERMES, SPLITS[split](output["answer"]), names))
               for name, output in RECORDED["outputs"].items()}
    assert outputs["one_call"] == [{"call": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}]
    assert outputs["two_calls"] == [{"call": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}]
    assert outputs["no_call"] == [RECORDED["outputs"]["no_call"]["answer"]]
    assert outputs["greeting"] == [RECORDED["outputs"]["greeting"]["answer"]]


def test_arguments_are_compact_json_that_keeps_unicode() -> None:
    [call] = read(ToolFamily.HERMES, ['<tool_call>\n{"name": "get_weather", "arguments": {"city":  "Zürich", '
                                      '"days": [1, 2]}}\n</tool_call>'])
    assert isinstance(call, ToolCall)
    assert call.arguments == '{"city":"Zürich","days":[1,2]}'


def test_ordinary_text_is_passed_on_at_once() -> None:
    reader = ToolCallReader(ToolFamily.HERMES, ["get_weather"])
    assert reader.feed("The weather") == ["The weather"]
    assert reader.feed(" in Paris is <") == [" in Paris is"]  # "<" may open <tool_call>
    assert reader.feed("b>sunny</b>") == [" <b>sunny</b>"]
    assert reader.feed(".") == ["."]
    assert reader.finish() == []


def test_a_call_is_given_as_soon_as_it_is_complete() -> None:
    reader = ToolCallReader(ToolFamily.HERMES, ["get_weather"])
    assert reader.feed('Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}') == ["Checking."]
    [call] = reader.feed("\n</tool_call>")
    assert isinstance(call, ToolCall) and call.name == "get_weather"
    assert reader.feed("\n<tool_") == []
    assert reader.finish() == ["<tool_"]


def test_llama_json_waits_only_while_it_can_still_be_a_call() -> None:
    reader = ToolCallReader(ToolFamily.LLAMA3, ["get_weather"])
    assert reader.feed('{"na') == []
    assert reader.feed('me": "get_weather", "parameters": {"city": "Paris"') == []
    [call] = reader.feed("}}")
    assert isinstance(call, ToolCall) and json.loads(call.arguments) == {"city": "Paris"}
    other = ToolCallReader(ToolFamily.LLAMA3, ["get_weather"])
    assert other.feed('{"city": "Paris", ') == ['{"city": "Paris",']  # not a call: streams from there
    assert other.feed('"sunny": true}') == [' "sunny": true}']


def test_a_call_to_no_tool_given_is_text_with_a_note() -> None:
    text = '<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>'
    [shown] = read(ToolFamily.HERMES, [text], tools=[])
    assert shown == text + '\n[Kestrel: the model called "get_weather", which is not one of the tools it was given; shown as text]'


def test_arguments_that_are_not_an_object_are_text_with_a_note() -> None:
    for text in ('<tool_call>{"name": "get_weather", "arguments": "Paris"}</tool_call>',
                 '<tool_call>{"name": "get_weather", "arguments": [1]}</tool_call>',
                 '<tool_call>{"weather": "Paris"}</tool_call>'):
        assert read(ToolFamily.HERMES, [text]) == [text + NOTE_INVALID]


def test_arguments_given_as_a_json_string_are_read() -> None:
    [call] = read(ToolFamily.MISTRAL, ['[TOOL_CALLS][{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}]'])
    assert isinstance(call, ToolCall) and call.arguments == '{"city":"Paris"}'


def test_text_after_a_broken_call_goes_on() -> None:
    text = "<|tool_call|>{oops}<|/tool_call|>"
    assert read(ToolFamily.PHI4, [text + " Sorry."]) == [text + NOTE_INVALID + " Sorry."]
    assert read(ToolFamily.GEMMA, ["<|tool_call>call:get_weather{"]) == ["<|tool_call>call:get_weather{" + NOTE_CUT_OFF]


def test_a_call_after_text_keeps_the_text_and_drops_the_blank_lines_between() -> None:
    items = read(ToolFamily.GPT_OSS, ["Let me check.\n\n<|channel|>commentary to=functions.get_weather <|constrain|>json"
                                      '<|message|>{"city":"Paris"}<|call|>\n\nDone.'])
    assert plain(items) == ["Let me check.", {"call": "get_weather", "arguments": {"city": "Paris"}}, "Done."]


def test_a_plain_answer_keeps_its_whitespace() -> None:
    assert read(ToolFamily.HERMES, list("  Hello,\n\n  world.  \n")) == ["  Hello,\n\n  world.  \n"]
    assert read(ToolFamily.LLAMA3, ["  \n "]) == ["  \n "]


TEMPLATE_FAMILIES: dict[str, ToolFamily | None] = {
    "ByteDance-Seed-OSS": None, "CohereForAI-c4ai-command-r-plus-tool_use": None,
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use": None, "HuggingFaceTB-SmolLM3-3B": None, "LFM2-8B-A1B": None,
    "LFM2.5-8B-A1B": None, "Mistral-Small-3.2-24B-Instruct-2506": ToolFamily.MISTRAL, "NVIDIA-Nemotron-Nano-v2": None,
    "Qwen-QwQ-32B": ToolFamily.HERMES, "Qwen-Qwen3-0.6B": ToolFamily.HERMES,
    "Qwen3-Coder": None,  # XML arguments inside <tool_call>: not read here
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B": None, "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": None,
    "deepseek-ai-DeepSeek-V3.1": None, "gemma4": ToolFamily.GEMMA, "glm_4_5": None,
    "google-gemma-2-2b-it": None, "ibm-granite-granite-3.3-2B-Instruct": ToolFamily.PHI4,
    "ibm-granite-granite-4.0": ToolFamily.HERMES, "llama-cpp-microsoft-Phi-4-mini-instruct": ToolFamily.PHI4,
    "meta-llama-Llama-3.2-3B-Instruct": ToolFamily.LLAMA3, "meta-llama-Llama-3.3-70B-Instruct": ToolFamily.LLAMA3,
    "microsoft-Phi-3.5-mini-instruct": None, "mistralai-Mistral-Nemo-Instruct-2407": ToolFamily.MISTRAL,
    "mistralai-Mistral-Small-3.1-24B-Instruct-2503": ToolFamily.MISTRAL, "moonshotai-Kimi-K2-Thinking": None,
    "moonshotai-Kimi-K2": None, "openai-gpt-oss-120b": ToolFamily.GPT_OSS, "tencent-Hy3-preview": None,
    "unsloth-MiniMax-M2": None,
    # tests/fixtures/tool_calls/templates
    "Qwen2.5-Coder-0.5B-Instruct": ToolFamily.HERMES,
    "Qwen2.5-Coder-1.5B-Instruct": ToolFamily.HERMES,  # the one that teaches doubled braces
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": ToolFamily.HERMES,  # a Llama model: the template decides
    "vllm-examples-tool_chat_template_functiongemma": ToolFamily.GEMMA,
    "google-functiongemma": ToolFamily.GEMMA,
}
TEMPLATES = {path.stem: path for folder in ("chat_templates", "tool_calls/templates")
             for path in sorted((FIXTURES / folder).glob("*.jinja"))}


def test_every_real_template_is_in_the_table() -> None:
    assert set(TEMPLATES) == set(TEMPLATE_FAMILIES)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_the_family_comes_from_the_template_text(name: str) -> None:
    assert family_of(TEMPLATES[name].read_text(encoding="utf-8")) == TEMPLATE_FAMILIES[name]


def test_no_template_means_no_tools() -> None:
    # Gemma 3 270M (the old starter, small_real_model) carries no template; Kestrel formats it itself.
    assert family_of(None) is None and family_of("") is None


NOTES = re.compile(re.escape(NOTE_INVALID) + "|" + re.escape(NOTE_CUT_OFF)
                   + r"|\n\[Kestrel: the model called [^\n]* it was given; shown as text\]")
FRAGMENTS = [*MARKERS, "{", "}", "[", "]", '"name": "get_weather"', '"arguments": {', '"parameters": {', ": ", ", ",
             "call:get_weather", ";", " ", "\n", "a", "Paris", "1", '"', *(case["text"] for case in ANSWERS["cases"])]


@pytest.mark.parametrize("family", list(ToolFamily))
def test_no_text_is_ever_lost(family: ToolFamily) -> None:
    """Random mixes of markers, JSON bits and words: with no tools to call, all of it comes back;
    with tools, the pieces it comes in change nothing."""
    rng = random.Random(f"{family}")
    for _ in range(300):
        text = "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 25)))
        cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(0, 8)))) if len(text) > 1 else []
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
        shown = read(family, pieces, tools=[])
        assert all(isinstance(item, str) for item in shown)
        assert NOTES.sub("", "".join(str(item) for item in shown)) == text, text
        assert plain(read(family, pieces)) == plain(read(family, [text])), text  # however it streams


def test_marker_like_openings_are_not_held_for_long() -> None:
    reader = ToolCallReader(ToolFamily.GPT_OSS, ["get_weather"])
    assert reader.feed("<|channel|>") == []  # a harmony header is being read
    assert "".join(map(str, reader.feed("x" * 400))).startswith("<|channel|>x")
    fence = ToolCallReader(ToolFamily.HERMES, ["get_weather"])
    assert fence.feed("```json\n[1, 2]") == ["```json\n[1, 2]"]  # a fence whose JSON is no call object


def test_gemma_3_270m_carries_no_template(small_real_model: Path) -> None:
    """Gemma 3 270M: no chat template in its GGUF, so no tools are offered to it."""
    template = read_gguf_info(small_real_model).chat_template
    assert template is None and family_of(template) is None
