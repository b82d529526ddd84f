"""`kestrel chat` with a reasoning model: thinking apart from the answer, on every output."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_chat_cli import assert_no_traceback, json_lines, kestrel
from tests.helpers.thinking_gguf import ANSWER, THOUGHT


def test_json_marks_thinking_lines_apart_from_answer_deltas(thinking_model: Path) -> None:
    result = kestrel("chat", "--model", str(thinking_model), "--json", "--temperature", "0", "Hi")
    assert result.returncode == 0, result.stderr
    lines = json_lines(result.stdout)
    kinds = [line["type"] for line in lines]
    assert kinds[-1] == "done" and kinds.index("delta") > max(i for i, k in enumerate(kinds) if k == "thinking")
    assert "".join(line["text"] for line in lines if line["type"] == "thinking") == THOUGHT
    assert "".join(line["text"] for line in lines if line["type"] == "delta") == ANSWER
    assert lines[-1]["thinking_ms"] > 0


def test_piped_output_holds_the_answer_and_the_thinking_goes_to_stderr(thinking_model: Path) -> None:
    result = kestrel("chat", "--model", str(thinking_model), "Hi")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ANSWER + "\n"
    assert THOUGHT in result.stderr and "\x1b[" not in result.stdout + result.stderr
    assert_no_traceback(result)


def test_no_thinking_hides_it_and_think_off_asks_the_model_not_to(thinking_model: Path) -> None:
    hidden = kestrel("chat", "--model", str(thinking_model), "--no-thinking", "--json", "Hi")
    assert hidden.returncode == 0, hidden.stderr
    lines = json_lines(hidden.stdout)
    assert [line["type"] for line in lines if line["type"] != "delta"] == ["done"]
    assert lines[-1]["thinking_ms"] > 0, "the model still thought; it was only not printed"

    off = kestrel("chat", "--model", str(thinking_model), "--think", "off", "--json", "Hi")
    assert off.returncode == 0, off.stderr
    lines = json_lines(off.stdout)
    assert "".join(line["text"] for line in lines if line["type"] == "delta") == ANSWER
    assert lines[-1]["thinking_ms"] == 0
