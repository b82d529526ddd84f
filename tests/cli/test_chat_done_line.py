"""The `done` line `kestrel chat --json` ends an answer with: the same keys, order and values
since stats became AnswerStats (end to end in test_chat_cli)."""

from __future__ import annotations

import io
import json

import pytest

from app.cli.chat import _AnswerPrinter
from app.core.answer_stats import AnswerStats, FinishReason
from app.core.conversation import Message, MessageState, Role
from app.service.events import AnswerFinished

STATS = AnswerStats(ttft_ms=41.5, tokens=16, tokens_per_s=52.25, prompt_tokens=20, prompt_tokens_evaluated=7,
                    device="CPU", finish_reason=FinishReason.LENGTH, chat_format="embedded", total_ms=350.75,
                    messages_left_out=1, template_note="", thinking_ms=0.0, threads=4)
# The line as the Kestrel before typed stats wrote it, byte for byte.
LINE = ('{"type": "done", "ttft_ms": 41.5, "tokens": 16, "tokens_per_s": 52.25, "prompt_tokens": 20,'
        ' "prompt_tokens_evaluated": 7, "device": "CPU", "finish_reason": "length", "chat_format": "embedded",'
        ' "total_ms": 350.75, "messages_left_out": 1, "template_note": "", "thinking_ms": 0.0, "threads": 4}\n')


def _finished(stats: AnswerStats | None) -> AnswerFinished:
    return AnswerFinished(Message(2, 1, Role.ASSISTANT, "Hi", 0.0, MessageState.COMPLETE, stats))


def test_the_done_line_is_unchanged() -> None:
    out = io.StringIO()
    _AnswerPrinter(out, as_json=True).on_event(_finished(STATS))
    assert out.getvalue() == LINE
    stopped = io.StringIO()
    _AnswerPrinter(stopped, as_json=True).on_event(_finished(AnswerStats(finish_reason=FinishReason.CANCELLED)))
    assert json.loads(stopped.getvalue())["finish_reason"] == "cancelled"


def test_without_stats_the_done_line_has_only_its_type() -> None:
    out = io.StringIO()
    _AnswerPrinter(out, as_json=True).on_event(_finished(None))
    assert out.getvalue() == '{"type": "done"}\n'


def test_a_template_note_goes_to_stderr_in_plain_output(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    printer = _AnswerPrinter(out, as_json=False)
    printer.on_event(_finished(AnswerStats(tokens=3, template_note="the template failed; chatml used")))
    assert out.getvalue() == "\n" and capsys.readouterr().err == "kestrel: the template failed; chatml used\n"
    printer.on_event(_finished(STATS))
    assert capsys.readouterr().err == ""
