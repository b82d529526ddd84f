"""What the CLI prints from chats: control characters shown as escapes, never sent to the terminal."""

from __future__ import annotations

from app.cli.terminal_text import PATH_SHOWN, shown_path, terminal_line, terminal_text


def test_control_sequences_are_shown_not_obeyed() -> None:
    hostile = "a\x1b]0;title\x07b\x1b[2Jc\x9b31md\x7fe\u202egnp.exe\x00"
    shown = terminal_text(hostile)
    assert shown == "a\\x1b]0;title\\x07b\\x1b[2Jc\\x9b31md\\x7fe\\u202egnp.exe\\x00"
    assert shown.isprintable()


def test_text_keeps_its_lines_and_tabs_and_a_line_keeps_neither() -> None:
    assert terminal_text("one\r\ntwo\tthree\rfour\n") == "one\ntwo\tthree\\x0dfour\n"
    assert terminal_line("one\ntwo\tthree") == "one\\x0atwo\\x09three"
    assert terminal_text("Grüße, 鷹, عربى") == "Grüße, 鷹, عربى"


def test_a_long_path_is_shown_by_its_two_ends() -> None:
    short = "/home/ann/models/qwen.gguf"
    assert shown_path(short) == short
    long = "/home/ann/" + "d/" * 2000 + "model\x1b.gguf"
    shown = shown_path(long)
    assert len(shown) == PATH_SHOWN + 1 and shown.startswith("/home/ann/d/d/") and shown.endswith("d/model\\x1b.gguf")
