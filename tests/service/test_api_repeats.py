"""Which API calls count as repeats of one already answered, and what the second try may send
(app/service/api/api_repeats.py); the whole path, through the real server, is in
tests/server/test_api_repeated_calls.py."""

from __future__ import annotations

import json

from app.core.answer_stats import AnswerStats, FinishReason
from app.engine.protocol import AnswerShape, ChatMessage, Delta, Done, ToolCall
from app.service.api.api_repeats import CopyHold, RepeatWatch, answered_calls, asked_again

TOOLS = json.dumps([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])
AUTO = AnswerShape(tools=TOOLS)


def _turns(question: str = "Weather in Paris?", *, later: bool = False) -> tuple[ChatMessage, ...]:
    made = (ChatMessage("user", question),
            ChatMessage("assistant", "", tool_calls=(ToolCall(0, "call_1", "get_weather", '{"city": "Paris"}'),)),
            ChatMessage("tool", "22 °C, sunny", tool_call_id="call_1"))
    return (*made, ChatMessage("assistant", "It is sunny."), ChatMessage("user", "And now?")) if later else made


def _call(arguments: str, index: int = 0) -> Delta:
    return Delta(1, "", tool_call=ToolCall(index, f"call_{index}", "get_weather", arguments))


def _done(reason: FinishReason = FinishReason.STOP) -> Done:
    return Done(1, AnswerStats(finish_reason=reason))


def test_an_answered_call_in_any_spelling_is_a_repeat_and_asks_again_from_its_result() -> None:
    watch = RepeatWatch(_turns(), AUTO)
    assert watch.passes(_call('{ "city":"Paris" }')) is None
    assert watch.ask_again(_done()) == 2
    again = asked_again(_turns(), 2, _call("{}").tool_call)  # type: ignore[arg-type]
    assert again[2].content.startswith("22 °C, sunny\n\n[Kestrel:") and again[:2] == _turns()[:2]


def test_new_calls_words_and_other_choices_are_sent_as_they_are() -> None:
    watch = RepeatWatch(_turns(), AUTO)
    assert watch.passes(_call('{"city": "Paris"}', 0)) is None
    sent = watch.passes(_call('{"city": "Lyon"}', 1))
    assert sent is not None and sent.tool_call is not None and sent.tool_call.index == 0, "renumbered from 0"
    assert watch.ask_again(_done()) is None, "a new call: the client runs it"
    worded = RepeatWatch(_turns(), AUTO)
    assert worded.passes(Delta(1, "It is 22 °C.")) is not None and worded.passes(_call('{"city":"Paris"}')) is None
    assert worded.ask_again(_done()) is None, "the words are the answer"
    forced = RepeatWatch(_turns(), AnswerShape(tools=TOOLS, tool_choice="required"))
    assert forced.passes(_call('{"city": "Paris"}')) is not None, "the client asked for a call"
    cut = RepeatWatch(_turns(), AUTO)
    cut.passes(_call('{"city": "Paris"}'))
    assert cut.ask_again(_done(FinishReason.CANCELLED)) is None


def test_a_call_from_an_earlier_question_may_be_made_again() -> None:
    assert answered_calls(_turns(later=True)) == {}
    assert RepeatWatch(_turns(later=True), AUTO).passes(_call('{"city": "Paris"}')) is not None


def test_the_second_try_streams_words_and_drops_a_call_copied_as_text() -> None:
    words = CopyHold(AUTO)
    assert words.passes(Delta(1, " ")) == [] and [d.text for d in words.passes(Delta(1, "It"))] == [" ", "It"]
    assert [d.text for d in words.passes(Delta(1, " is"))] == [" is"] and words.rest() == []
    copy = CopyHold(AUTO)
    for piece in ('{{"name": "get_weather", ', '"arguments": {"city": "Paris"}}}'):
        assert copy.passes(Delta(1, piece)) == []
    assert copy.rest() == []
    json_answer = CopyHold(AUTO)
    assert json_answer.passes(Delta(1, '{"temperature": 22}')) == []
    assert [d.text for d in json_answer.rest()] == ['{"temperature": 22}'], "held to the end, then sent"
