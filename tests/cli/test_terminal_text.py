"""What the CLI prints from chats: control characters shown as escapes, never sent to the terminal."""

from __future__ import annotations

from app.cli.terminal_text import terminal_line, terminal_text


def test_control_sequences_are_shown_not_obeyed() -> None:
    hostile = "a\x1b]0;title\x07b\x1b[2Jc\x9b31md\x7fe\u202egnp.exe\x00"
    shown = terminal_text(hostile)
    assert shown == "a\\x1b]0;title\\x07b\\x1b[2Jc\\x9b31md\\x7fe\\u202egnp.exe\\x00"
    assert shown.isprintable()


def test_text_keeps_its_lines_and_tabs_and_a_line_keeps_neither() -> None:
    assert terminal_text("one\r\ntwo\tthree\rfour\n") == "one\ntwo\tthree\\x0dfour\n"
    assert terminal_line("one\ntwo\tthree") == "one\\x0atwo\\x09three"
    assert terminal_text("Grüße, 鷹, عربى") == "Grüße, 鷹, عربى"
