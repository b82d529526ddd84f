"""What an answer's stats show in the window: the footer line, the thinking header, the context
line and the template tooltip, read from AnswerStats, the same words as when stats were a dict."""

from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtCore import QEvent, QPoint
from PySide6.QtGui import QHelpEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QStyleOptionViewItem, QToolTip

from app.core.answer_stats import AnswerStats, FinishReason
from app.core.conversation import Message, MessageState, Role
from app.ui.messages.message_chrome import footer_text, stats_line
from app.ui.state.message_model import MessageListModel
from app.ui.messages.message_view import MessageView
from app.ui.messages.thinking_section import ThinkingSection

STATS = AnswerStats(ttft_ms=120.4, tokens=64, tokens_per_s=35.25, prompt_tokens=30, device="CPU",
                    finish_reason=FinishReason.STOP, chat_format="embedded", total_ms=1900.0)
FAILED = AnswerStats(error="The engine stopped.")


def _answer(stats: AnswerStats | None, state: MessageState = MessageState.COMPLETE, *, number: int = 2,
            thinking: str = "") -> Message:
    return Message(number, 1, Role.ASSISTANT, "An answer.", 0.0, state, stats, thinking)


@pytest.mark.parametrize(("stats", "line"), [
    (STATS, "TTFT 120 ms · 35.2 tok/s · 64 tokens · CPU"),
    (dataclasses.replace(STATS, finish_reason=FinishReason.CANCELLED),
     "TTFT 120 ms · 35.2 tok/s · 64 tokens · CPU · stopped"),
    (dataclasses.replace(STATS, finish_reason=FinishReason.LENGTH),
     "TTFT 120 ms · 35.2 tok/s · 64 tokens · CPU · cut at the token limit"),
    (dataclasses.replace(STATS, finish_reason=FinishReason.CONTEXT, device="GPU 0 (CUDA)", template_note="bad"),
     "TTFT 120 ms · 35.2 tok/s · 64 tokens · GPU 0 (CUDA) · cut at the token limit"
     " · built-in chat format (the model's own failed)"),
    # Stopped while it waited for the engine: nothing ran, as the footer has always said.
    (AnswerStats(finish_reason=FinishReason.CANCELLED), "TTFT 0 ms · 0.0 tok/s · 0 tokens · stopped"),
    # A row of the first stats format (no device key) and an engine failure's row.
    (AnswerStats.from_dict({"ttft_ms": 80, "tokens": 12, "tokens_per_s": 40.0, "finish_reason": "stop"}),
     "TTFT 80 ms · 40.0 tok/s · 12 tokens"),
    (AnswerStats.from_dict({"error": "The engine stopped."}), ""),
    (None, ""),
])
def test_the_stats_line_says_what_it_said_before(stats: AnswerStats | None, line: str) -> None:
    assert stats_line(stats) == line


def test_the_footer_of_an_interrupted_answer() -> None:
    assert footer_text(_answer(FAILED, MessageState.INTERRUPTED), "writing…") == "Interrupted: the answer was cut off"
    assert footer_text(_answer(None, MessageState.INTERRUPTED), "writing…") == "Interrupted: the answer was cut off"
    stopped = dataclasses.replace(STATS, finish_reason=FinishReason.CANCELLED)
    assert (footer_text(_answer(stopped, MessageState.INTERRUPTED), "writing…")
            == "Interrupted: TTFT 120 ms · 35.2 tok/s · 64 tokens · CPU · stopped")
    assert footer_text(_answer(None, MessageState.STREAMING), "writing…") == "writing…"


@pytest.mark.parametrize(("thinking_ms", "header"), [
    (1234.0, "▸ Thought for 1.2 s"), (40.0, "▸ Thought for a moment"), (0.0, "▸ Thought")])
def test_the_thinking_header_says_how_long_it_thought(thinking_ms: float, header: str) -> None:
    section = ThinkingSection(lambda _text, _width: None)
    message = _answer(dataclasses.replace(STATS, thinking_ms=thinking_ms), thinking="Hmm.")
    assert section.header(message) == header
    assert section.header(_answer(None, thinking="Hmm.")) == "▸ Thought"


def _chat(*answers: AnswerStats | None) -> list[Message]:
    messages = []
    for number, stats in enumerate(answers):
        messages.append(Message(2 * number + 1, 1, Role.USER, f"Question {number}", 0.0, MessageState.COMPLETE, None))
        messages.append(_answer(stats, number=2 * number + 2))
    return messages


def test_the_context_line_follows_the_latest_answers_stats(qtbot) -> None:
    model = MessageListModel()
    model.reset_to(_chat(STATS, STATS, dataclasses.replace(STATS, messages_left_out=2)))
    assert [row for row in range(model.rowCount()) if model.starts_context(row)] == [2]
    # The latest answer failed: it has no report, and (as before) nothing is marked left out.
    model.reset_to(_chat(dataclasses.replace(STATS, messages_left_out=2), FAILED))
    assert not any(model.starts_context(row) for row in range(model.rowCount()))
    # One without stats, or one still streaming, is passed over for the answer before it.
    messages = _chat(STATS, dataclasses.replace(STATS, messages_left_out=2), None)
    model.reset_to(messages)
    assert [row for row in range(model.rowCount()) if model.starts_context(row)] == [2]
    model.reset_to([*messages[:-1], _answer(None, MessageState.STREAMING, number=6)])
    assert [row for row in range(model.rowCount()) if model.starts_context(row)] == [2]


def test_an_answers_tooltip_gives_the_template_note(qtbot) -> None:
    model = MessageListModel()
    model.reset_to(_chat(dataclasses.replace(STATS, template_note="the template has an error on its line 1"), FAILED))
    view = MessageView()
    view.setModel(model)
    view.resize(900, 700)
    qtbot.addWidget(view)
    view.show()
    qtbot.waitExposed(view)
    QTest.qWait(20)
    for row, shown in [(1, True), (3, False)]:
        rect = view.visualRect(model.index(row, 0))
        point = QPoint(rect.left() + 5, rect.top() + 5)
        event = QHelpEvent(QEvent.Type.ToolTip, point, view.viewport().mapToGlobal(point))
        QToolTip.hideText()
        assert view.delegate.helpEvent(event, view, QStyleOptionViewItem(), model.index(row, 0)) is shown
        if shown:
            assert "has an error on its line 1" in QToolTip.text()
