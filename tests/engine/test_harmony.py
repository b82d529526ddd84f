"""gpt-oss's harmony channels told apart while the text streams: analysis is thinking."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.templates.chat_format import ModelTokens, build_prompt
from app.engine.answers.harmony import HEADER_LIMIT, HarmonyChannels, HarmonySplitter
from app.engine.protocol import ChatMessage, ToolCall
from app.engine.answers.thinking import (ThinkingMarkers, ThinkingSplitter, answer_stops, has_switch, splitter_for,
                                 thinking_in)
from app.engine.tool_calls.tool_calls import ToolCallReader, ToolFamily

TEMPLATES = Path(__file__).resolve().parents[1] / "fixtures" / "chat_templates"
THOUGHT = "User says hi. Reply politely."
# As the vendored llama.cpp prints them: with <|end|> (should it print) and without.
STREAMS = {
    "analysis, end, final": (f"<|channel|>analysis<|message|>{THOUGHT}<|end|>"
                             "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?"),
    "analysis, final (end not printed)": (f"<|channel|>analysis<|message|>{THOUGHT}"
                                          "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?"),
    "final only, then return printed": "<|channel|>final<|message|>Hello! How can I help?<|return|>",
}
EXPECTED = {
    "analysis, end, final": (THOUGHT, "Hello! How can I help?"),
    "analysis, final (end not printed)": (THOUGHT, "Hello! How can I help?"),
    "final only, then return printed": ("", "Hello! How can I help?"),
}
CALL_HEADERS = ("<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>",
                "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>")


def _split(pieces: list[str], *, prompt: str = "") -> tuple[str, str]:
    """(thinking, answer) after feeding the pieces one by one."""
    splitter = HarmonySplitter(prompt=prompt)
    parts = [part for piece in pieces for part in splitter.feed(piece)] + splitter.finish()
    assert all(text for _, text in parts), "the splitter gave an empty part"
    return ("".join(text for thinking, text in parts if thinking),
            "".join(text for thinking, text in parts if not thinking))


def _every_split(text: str) -> list[list[str]]:
    """The text in two pieces at every point, in three at every pair of points 7 apart, and one
    character at a time."""
    twos = [[text[:cut], text[cut:]] for cut in range(len(text) + 1)]
    threes = [[text[:a], text[a:a + 7], text[a + 7:]] for a in range(len(text) - 7)]
    return twos + threes + [list(text)]


@pytest.mark.parametrize("name", STREAMS)
def test_analysis_is_thinking_and_final_is_the_answer_however_it_streams(name: str) -> None:
    for pieces in _every_split(STREAMS[name]):
        assert _split(pieces) == EXPECTED[name], pieces


@pytest.mark.parametrize("header", CALL_HEADERS)
def test_a_message_to_a_function_passes_raw_for_the_call_reader(header: str) -> None:
    stream = f"<|channel|>analysis<|message|>Need the weather.<|end|>{header}" + '{"city":"Oslo"}'
    for pieces in _every_split(stream):
        assert _split(pieces) == ("Need the weather.", header + '{"city":"Oslo"}'), pieces
        splitter, reader = HarmonySplitter(), ToolCallReader(ToolFamily.GPT_OSS, ["get_weather"])
        read: list[str | ToolCall] = []
        for piece in pieces:
            for thinking, text in splitter.feed(piece):
                read += [] if thinking else reader.feed(text)
        read += [item for thinking, text in splitter.finish() if not thinking for item in reader.feed(text)]
        read += reader.finish()
        calls = [(c.name, c.arguments) for c in read if isinstance(c, ToolCall)]
        assert calls == [("get_weather", '{"city":"Oslo"}')], pieces
        assert not [item for item in read if isinstance(item, str) and item.strip()], read


def test_a_commentary_preamble_is_answer_text_and_a_second_message_a_new_paragraph() -> None:
    stream = ("<|channel|>analysis<|message|>Plan it.<|end|><|start|>assistant<|channel|>commentary<|message|>"
              "Let me look.<|end|><|start|>assistant<|channel|>final<|message|>It is sunny.")
    assert _split([stream]) == ("Plan it.", "Let me look.\n\nIt is sunny.")


def test_text_before_any_header_is_answer() -> None:
    assert _split(["Plain ", "words, no <|channel|>", "analysis<|message|>then thought"]) == (
        "then thought", "Plain words, no ")


def test_an_opener_that_never_gets_its_message_is_text() -> None:
    long_tail = "x" * HEADER_LIMIT
    assert _split(["a <|channel|>", long_tail]) == ("", f"a <|channel|>{long_tail}")


def test_an_answer_cut_off_inside_a_header_drops_the_header_but_keeps_the_thinking() -> None:
    splitter = HarmonySplitter()
    parts = splitter.feed("<|channel|>analysis<|message|>Still thinking  <|start|>assistant<|chan")
    assert parts + splitter.finish() == [(True, "Still thinking")] and splitter.thought


def test_a_cut_off_call_header_stays_for_the_reader_to_report() -> None:
    splitter = HarmonySplitter()
    assert splitter.feed("<|channel|>commentary to=functions.get_weather <|cons") == []
    assert splitter.finish() == [(False, "<|channel|>commentary to=functions.get_weather <|cons")]


def test_a_prompt_that_opens_the_analysis_channel_starts_in_the_thinking() -> None:
    prompt = "<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>analysis<|message|>"
    assert _split(["Hmm.<|end|><|start|>assistant<|channel|>final<|message|>Hi!"], prompt=prompt) == ("Hmm.", "Hi!")
    assert _split(["Hi!"], prompt="<|start|>user<|message|>Hi<|end|><|start|>assistant") == ("", "Hi!")


def test_the_gpt_oss_template_makes_a_harmony_thinker_without_a_switch() -> None:
    template = (TEMPLATES / "openai-gpt-oss-120b.jinja").read_text(encoding="utf-8")
    assert thinking_in(template) == HarmonyChannels() and not has_switch(template)
    assert isinstance(splitter_for(HarmonyChannels(), "<|start|>assistant"), HarmonySplitter)
    qwen = (TEMPLATES / "Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8")
    assert thinking_in(qwen) == ThinkingMarkers("<think>", "</think>") and has_switch(qwen)
    assert isinstance(splitter_for(ThinkingMarkers("<think>", "</think>"), ""), ThinkingSplitter)
    assert thinking_in("{{ '<|im_start|>' }}") is None and thinking_in(None) is None
    assert answer_stops(ThinkingMarkers("<think>", "</think>"), ("<|end|>",)) == ("<|end|>",)
    assert answer_stops(None, ("<|end|>",)) == ("<|end|>",)


GPT_OSS_TOKENS = ModelTokens(bos="<|startoftext|>", eos="<|return|>")
WEATHER_CALL = ToolCall(0, "call_1", "get_weather", '{"city":"Oslo"}')


def _gpt_oss_prompt(*messages: ChatMessage) -> str:
    spec = build_prompt(messages, template=(TEMPLATES / "openai-gpt-oss-120b.jinja").read_text(encoding="utf-8"),
                        architecture="gpt-oss", tokens=GPT_OSS_TOKENS)
    assert (spec.chat_format, spec.note) == ("embedded", None), spec.note
    assert "<|end|>" not in answer_stops(HarmonyChannels(), spec.stop) and "<|end|>" in spec.stop
    return spec.text


def test_gpt_oss_s_template_takes_an_earlier_answer_with_its_thinking() -> None:
    prompt = _gpt_oss_prompt(ChatMessage("user", "Hi"), ChatMessage("assistant", "Hello!", thinking="User greets."),
                             ChatMessage("user", "Weather?"))
    # Its template drops the thinking of earlier answers; the answer goes back on the final channel.
    assert prompt.endswith("<|start|>assistant<|channel|>final<|message|>Hello!<|end|>"
                           "<|start|>user<|message|>Weather?<|end|><|start|>assistant")
    assert "User greets." not in prompt


@pytest.mark.parametrize("said", ["", "Let me look."])
def test_gpt_oss_s_template_takes_a_calling_turn_with_thinking_and_maybe_text(said: str) -> None:
    # It refuses a calling turn with both text and thinking; the text the user saw goes back.
    prompt = _gpt_oss_prompt(ChatMessage("user", "Weather?"),
                             ChatMessage("assistant", said, thinking="Need the weather.", tool_calls=(WEATHER_CALL,)),
                             ChatMessage("tool", "18 C", tool_call_id="call_1"))
    analysis = said or "Need the weather."
    assert (f"<|start|>assistant<|channel|>analysis<|message|>{analysis}<|end|><|start|>assistant "
            'to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Oslo"}<|call|>') in prompt
