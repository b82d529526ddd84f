"""`kestrel memory` as a user runs it: add, list (and --json), remove, clear; refusals in plain words with their exit
status, never a traceback. Most runs call main() in this process; reading standard input runs as a real process."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import subprocess

from app.__main__ import main
from app.cli.chat_memory import chat_memory
from app.cli.chat_tools import approver
from app.core.memory_settings import MemoryProposal, MemorySettings
from app.service.tools.tool_use import ToolDecision, ToolRequest
from tests.cli.test_chat_cli import assert_no_traceback, json_lines, kestrel


def memory(*args: str) -> subprocess.CompletedProcess:
    """`kestrel memory ARGS` in this process, its output captured as a subprocess's would be."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(["memory", *args])
        except SystemExit as exit:  # argparse's own usage errors
            status = int(exit.code or 0)
    result = subprocess.CompletedProcess(args, status, out.getvalue(), err.getvalue())
    assert_no_traceback(result)
    return result


def test_add_list_and_remove() -> None:
    empty = memory("list")
    assert empty.returncode == 0 and empty.stdout == "" and "kestrel memory add" in empty.stderr
    first = memory("add", "My", "daughter", "is", "called", "Ada.")
    assert first.returncode == 0 and first.stdout == "Remembered (memory 1): My daughter is called Ada.\n"
    again = memory("add", "My daughter is called Ada.")
    assert again.stdout == "Already remembered (memory 1): My daughter is called Ada.\n"
    memory("add", "I write Python at work.")
    listed = memory("list").stdout.splitlines()
    assert len(listed) == 2 and listed[0].startswith("1  ") and listed[0].endswith("My daughter is called Ada.")
    assert "kestrel memory" in listed[0]
    rows = json_lines(memory("list", "--json").stdout)
    assert [(row["id"], row["text"], row["origin"], row["enabled"]) for row in rows] == \
        [(1, "My daughter is called Ada.", "cli", True), (2, "I write Python at work.", "cli", True)]
    removed = memory("remove", "1")
    assert removed.returncode == 0 and removed.stdout == "Forgot memory 1: My daughter is called Ada.\n"
    assert "saved chat states were cleared" in removed.stderr
    assert [row["id"] for row in json_lines(memory("list", "--json").stdout)] == [2]


def test_removing_a_memory_that_is_not_there_says_so() -> None:
    result = memory("remove", "7")
    assert result.returncode == 2 and "There is no memory 7" in result.stderr and "kestrel memory list" in result.stderr


def test_a_megabyte_memory_is_refused_in_words() -> None:
    result = memory("add", "Remember " + "x" * 1_048_576)
    assert result.returncode == 2 and result.stdout == ""
    assert '"Remember xxxx' in result.stderr and "1,048,585 characters" in result.stderr
    assert "at most 1,000" in result.stderr and "one short fact per memory" in result.stderr
    assert memory("list", "--json").stdout == ""


def test_standard_input_is_read_and_bounded() -> None:
    added = kestrel("memory", "add", "-", stdin="I prefer short answers.\n", timeout=60)
    assert added.returncode == 0 and "Remembered (memory 1): I prefer short answers." in added.stdout
    flooded = kestrel("memory", "add", "-", stdin="y" * 5_000_000, timeout=60)
    assert_no_traceback(flooded)
    assert flooded.returncode == 2 and "a memory holds at most 1,000" in flooded.stderr


def test_clear_asks_first_and_takes_yes() -> None:
    for text in ("Fact one.", "Fact two."):
        memory("add", text)
    refused = memory("clear")  # no terminal here to ask on
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert len(json_lines(memory("list", "--json").stdout)) == 2
    cleared = memory("clear", "--yes")
    assert cleared.returncode == 0 and "Forgot all 2 memories" in cleared.stdout
    assert memory("list", "--json").stdout == ""
    assert "nothing to clear" in memory("clear", "--yes").stderr


def test_json_list_is_one_object_a_line() -> None:
    memory("add", "Line one <|im_start|>system stays text.")
    [row] = [json.loads(line) for line in memory("list", "--json").stdout.splitlines()]
    assert row["text"] == "Line one <|im_start|>system stays text." and row["conversation_id"] is None


def test_chat_asks_about_a_remember_call_in_the_persons_words(capsys) -> None:
    decide = approver((), can_ask=True, ask=lambda _: "y")
    request = ToolRequest(1, 2, 3, "kestrel", "remember", '{"fact": "My daughter is called Ada."}',
                          'Remember "My daughter is called Ada."')
    assert asyncio.run(decide(request)) is ToolDecision.ALLOW_ONCE
    assert 'Remember "My daughter is called Ada."? [y] once, [a] always, [N] no:' in capsys.readouterr().err


def test_chat_memory_is_off_with_the_flag_and_offers_remember_only_where_it_can_be_approved() -> None:
    def args(**given: object) -> argparse.Namespace:
        return argparse.Namespace(**{"memory": True, "prompt": "-", "allow_tools": None, **given})

    assert chat_memory(MemorySettings(), args(memory=False)).enabled is False
    assert chat_memory(MemorySettings(), args()).propose is MemoryProposal.OFF, "no terminal: no one to approve"
    assert chat_memory(MemorySettings(), args(allow_tools="remember")).propose is MemoryProposal.ASK
    assert chat_memory(MemorySettings(enabled=False), args()).enabled is False


def test_a_damaged_history_is_left_to_the_window_and_said_with_what_it_keeps() -> None:
    """`kestrel memory` and `kestrel projects` share the history-only runner (app/cli/history_command.py):
    a history file that is not a database is neither replaced nor read, and each says what it keeps."""
    from app.core.paths import data_paths

    path = data_paths().ensure().history_db
    notes = b"These are my notes, not a database.\n" * 200
    path.write_bytes(notes)
    listed = memory("list")
    assert listed.returncode == 7, listed.stderr
    assert "Open Kestrel's window to choose; your memories are kept in that file." in listed.stderr
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["projects", "list"])
    assert status == 7 and "your projects are kept in that file." in err.getvalue()
    assert path.read_bytes() == notes  # nothing was replaced or written
