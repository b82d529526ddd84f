"""How `chat` writes thinking on a terminal, in JSON, and to a pipe (the pipe also end to end in test_chat_thinking)."""

from __future__ import annotations

import io
import json

import pytest

from app.cli.thinking_output import ThinkingOutput


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_thinking_is_dimmed_then_the_answer_follows_at_normal_intensity() -> None:
    out = Terminal()
    thinking = ThinkingOutput(out, as_json=False, show=True)
    thinking.write("Let me ")
    thinking.write("see.")
    thinking.end()
    thinking.end()  # a second end (answer done after it started) writes nothing
    assert out.getvalue() == "\x1b[2mLet me see.\x1b[22m\n\n"


def test_piped_thinking_goes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    thinking = ThinkingOutput(out, as_json=False, show=True)
    thinking.write("Hmm.")
    thinking.end()
    assert out.getvalue() == "" and capsys.readouterr().err == "Hmm.\n\n"


def test_json_lines_and_hidden_thinking() -> None:
    out = io.StringIO()
    ThinkingOutput(out, as_json=True, show=True).write("Hmm.")
    assert [json.loads(line) for line in out.getvalue().splitlines()] == [{"type": "thinking", "text": "Hmm."}]
    hidden = Terminal()
    quiet = ThinkingOutput(hidden, as_json=False, show=False)
    quiet.write("secret")
    quiet.end()
    assert hidden.getvalue() == ""
