"""Red team, issue 35 item 15: `kestrel export` with standard output closed (`>&-`) says so in
plain words and exits 7, and the hidden temporary file an export killed mid-write leaves
beside its target is removed by the next export there; nothing else of the user's is.

Real processes: the shell closes descriptor 1 before Kestrel starts (subprocess.DEVNULL
would be an open file), and a real writer is killed with SIGKILL while it writes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from app.core.conversation import Role
from app.core.store.history import HistoryStore
from app.core.paths import data_paths
from tests.cli.test_chat_cli import ROOT, kestrel

pytestmark = pytest.mark.skipif(os.name == "nt", reason="closing a descriptor with `>&-` and SIGKILL are POSIX")

EXIT_NOT_DONE = 7
LONG_AGO_S = 3600


def _saved_chat() -> int:
    with HistoryStore(data_paths().ensure().history_db) as store:
        chat = store.create_conversation("Birds of prey")
        store.add_message(chat.id, Role.USER, "What is a kestrel?")
        store.add_message(chat.id, Role.ASSISTANT, "A small falcon.")
        return chat.id


def _with_stdout_closed(*args: str) -> subprocess.CompletedProcess:
    command = " ".join(f"'{a}'" for a in (sys.executable, "-m", "app", *args))
    return subprocess.run(["sh", "-c", f"exec {command} >&-"], cwd=ROOT, stderr=subprocess.PIPE, text=True,
                          encoding="utf-8", timeout=60)


@pytest.mark.parametrize("listing", [False, True], ids=["a chat", "the list"])
def test_export_with_standard_output_closed_says_so_and_exits_7(listing: bool) -> None:
    chat = _saved_chat()

    result = _with_stdout_closed("export", *([] if listing else [str(chat), "--format", "json"]))

    assert result.returncode == EXIT_NOT_DONE, result.stderr
    assert "Traceback" not in result.stderr and "Error" not in result.stderr, result.stderr
    assert "standard output is closed" in result.stderr, result.stderr
    assert listing or "-o FILE" in result.stderr, "it says how to export without standard output"


def test_export_to_a_file_needs_no_standard_output(tmp_path: Path) -> None:
    chat = _saved_chat()

    result = _with_stdout_closed("export", str(chat), "-o", str(tmp_path / "chat.md"))

    assert result.returncode == 0, result.stderr
    assert "A small falcon." in (tmp_path / "chat.md").read_text(encoding="utf-8")


@contextmanager
def _writing(target: Path) -> Iterator[subprocess.Popen]:
    """A real writer of target (the export's own write_user_file), held in the middle of its
    write, its temporary file beside target, for the length of the block; killed after."""
    script = ("import os, sys, time\n"
              "from pathlib import Path\n"
              "from app.core.files import write_user_file\n"
              "os.fsync = lambda fd: (print('writing', flush=True), time.sleep(120))\n"
              "write_user_file(Path(sys.argv[1]), b'half of a chat', replace=False)\n")
    writer = subprocess.Popen([sys.executable, "-c", script, str(target)], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True)
    assert writer.stdout is not None
    with writer.stdout:
        try:
            assert writer.stdout.readline().strip() == "writing"
            yield writer
        finally:
            writer.kill()
            writer.wait(timeout=30)


def _temporary_of(target: Path) -> Path:
    [left] = [p for p in target.parent.iterdir() if p.name.startswith(f".{target.name}.")]
    return left


def _killed_while_writing(target: Path) -> Path:
    """The temporary file a writer killed with SIGKILL in the middle of its write leaves."""
    with _writing(target) as writer:
        writer.send_signal(signal.SIGKILL)
    return _temporary_of(target)


def test_the_next_export_removes_a_killed_exports_temporary_file_and_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "chat.json"
    left = _killed_while_writing(target)
    assert left.name.endswith(".tmp") and not target.exists()
    a_minute_ago = time.time() - 60  # its writer's lock went with it: no need to wait an hour
    os.utime(left, (a_minute_ago, a_minute_ago))
    stamp = time.time() - LONG_AGO_S
    theirs = {tmp_path / ".notes.tmp": b"my notes", tmp_path / ".chat.json.my-draft.tmp": b"a draft",
              tmp_path / ".chat.json.0123456789.tmp": b"not ours: ten digits",
              tmp_path / ".other.json.89abcdef.tmp": b"another target's"}
    for path, data in theirs.items():
        path.write_bytes(data)
        os.utime(path, (stamp, stamp))

    result = kestrel("export", str(_saved_chat()), "--format", "json", "-o", str(target), timeout=60)

    assert result.returncode == 0, result.stderr
    assert not left.exists(), "the killed export's temporary file is still there"
    assert target.exists()
    for path, data in theirs.items():
        assert path.read_bytes() == data, f"{path.name} of the user's was touched"


def test_a_temporary_file_being_written_right_now_is_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "chat.json"
    with _writing(target):
        busy = _temporary_of(target)
        stamp = time.time() - 2 * LONG_AGO_S  # a stuck disk's fsync: still its writer's
        os.utime(busy, (stamp, stamp))

        result = kestrel("export", str(_saved_chat()), "--format", "json", "-o", str(target), timeout=60)

        assert result.returncode == 0, result.stderr
        assert busy.exists(), "a write still in progress lost its temporary file"
