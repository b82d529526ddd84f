"""The messages between the processes: settings, stats and error kinds as one shared definition."""

from __future__ import annotations

import json
import pickle

from app.core.answer_stats import AnswerStats
from app.core.generation import GenerationSettings
from app.engine import protocol as p
from app.service.client import EngineCrashed, EngineError

STATS = AnswerStats(ttft_ms=12.5, tokens=20, tokens_per_s=80.0, prompt_tokens=31, prompt_tokens_evaluated=9,
                    device="CPU", finish_reason="length", chat_format="embedded", total_ms=260.0,
                    messages_left_out=2)


def test_messages_cross_the_pipe_whole() -> None:
    settings = GenerationSettings(temperature=0.2, max_tokens=64, seed=7)
    messages = [p.Generate(3, (p.ChatMessage("user", "hi"),), settings, ("</s>",), True), p.Done(3, STATS),
                p.Error(3, p.ErrorKind.CONTEXT, "too long", {"prompt_tokens": 900})]

    assert [pickle.loads(pickle.dumps(m)) for m in messages] == messages
    assert messages[0].settings is settings and p.Generate(4, ()).settings == GenerationSettings()


def test_done_says_its_finish_reason_once() -> None:
    assert p.Done(3, STATS).finish_reason == "length"


def test_answer_stats_round_trip_and_forgive_old_and_new_rows() -> None:
    assert AnswerStats.from_dict(json.loads(json.dumps(STATS.to_dict()))) == STATS
    assert set(STATS.to_dict()) == {
        "ttft_ms", "tokens", "tokens_per_s", "prompt_tokens", "prompt_tokens_evaluated", "device",
        "finish_reason", "chat_format", "total_ms", "messages_left_out", "template_note", "thinking_ms", "threads"}
    older = AnswerStats.from_dict({"tokens": 1, "device": "cpu", "ttft_ms": None, "from_the_future": 1})
    assert older == AnswerStats(tokens=1, device="cpu")


def test_error_kinds_are_strings_too() -> None:
    kind = p.ErrorKind.CONTEXT
    assert kind == "context_overflow" and str(kind) == "context_overflow" and f"{kind}" == "context_overflow"
    assert json.dumps({"kind": kind}) == '{"kind": "context_overflow"}'
    assert EngineError("no_model", "Choose a model first.").kind is p.ErrorKind.NO_MODEL
    assert EngineCrashed("gone", -9, "generate").kind is p.ErrorKind.CRASHED
