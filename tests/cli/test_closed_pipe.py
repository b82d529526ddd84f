"""Output into a pipe whose reader went away (`kestrel models list | head -1`): every command
that prints ends quietly with status 0, as the README says of a list cut short by its
reader, with no message (there is nothing wrong to report) and no traceback (issue 28,
item 9), `export CHAT-ID` too (tests/cli/test_export_targets.py).

The reading end is closed before the command starts, so every write it makes fails, as
it does once `head` has read what it wanted and left."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from app.core.store.history import HistoryStore
from app.core.paths import data_paths
from tests.cli.test_chat_cli import ROOT
from tests.cli.test_models_cli import added

EXIT_READER_GONE = 0


def into_closed_pipe(*args: str, timeout: float = 120) -> tuple[int, str]:
    """Run `python -m app ARGS` with standard output a pipe nobody reads: (status, stderr)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        process = subprocess.Popen([sys.executable, "-m", "app", *args], cwd=ROOT, stdout=write_end,
                                   stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    finally:
        os.close(write_end)
    children: dict[int, psutil.Process] = {}
    watcher = threading.Thread(target=_note_children, args=(process, children), daemon=True)
    watcher.start()
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    watcher.join()
    left = [child for child in children.values() if _still_running(child, within_s=10)]
    assert not left, f"left running after the command ended: {left}"
    return process.returncode, stderr.decode("utf-8", "replace")


def _note_children(process: subprocess.Popen, children: dict[int, psutil.Process]) -> None:
    """Every process the command starts (chat's engine), seen while it runs."""
    try:
        parent = psutil.Process(process.pid)
        while process.poll() is None:
            children.update((child.pid, child) for child in parent.children(recursive=True))
            time.sleep(0.05)
    except psutil.Error:
        return


def _still_running(child: psutil.Process, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if not child.is_running() or child.status() == psutil.STATUS_ZOMBIE:
                return False
        except psutil.Error:
            return False
        time.sleep(0.1)
    return True


def library_of_three(tiny_model: Path, folder: Path) -> None:
    for name in ("one", "two", "three"):
        copy = folder / f"{name}.gguf"
        copy.write_bytes(tiny_model.read_bytes())
    assert added(folder)


@pytest.mark.parametrize("args", [["models", "list"], ["models", "list", "--json"], ["models", "catalog"],
                                  ["models", "info", "one"]])
def test_models_commands_end_quietly(args: list[str], tiny_model: Path, tmp_path: Path) -> None:
    library_of_three(tiny_model, tmp_path)
    assert into_closed_pipe(*args) == (EXIT_READER_GONE, "")


def test_doctor_ends_quietly() -> None:
    assert into_closed_pipe("doctor") == (EXIT_READER_GONE, "")


def test_the_list_of_chats_ends_quietly() -> None:
    with HistoryStore(data_paths().ensure().history_db) as history:
        chat = history.create_conversation("A chat to export")
        history.add_message(chat.id, history_role("user"), "Hello there")
    assert into_closed_pipe("export") == (EXIT_READER_GONE, "")


def test_chat_stops_its_answer_and_ends_quietly(tiny_model: Path) -> None:
    status, stderr = into_closed_pipe("chat", "--model", str(tiny_model), "--max-tokens", "400",
                                      "--ctx", "512", "Tell me a long story")
    assert (status, stderr) == (EXIT_READER_GONE, "")


def history_role(name: str):  # type: ignore[no-untyped-def]
    from app.core.conversation import Role

    return Role(name)
