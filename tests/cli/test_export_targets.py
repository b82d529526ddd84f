"""`kestrel export -o PATH` writes only a new file or one the user said to replace: never
through a link, never over a device, a pipe or a folder, never into a folder it made up;
and standard output that is full or closed is said in plain words."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from app.core.conversation import Role
from app.core.store.history import HistoryStore
from app.core.paths import data_paths
from tests.cli.test_chat_cli import ROOT, assert_no_traceback, kestrel

pytestmark = pytest.mark.skipif(os.name == "nt", reason="FIFOs, devices and /dev/full are POSIX")

TITLE = "Birds \x1b]0;owned\x07of \x1b[31mprey\x9b2J"


def _saved_chat(title: str = "Birds of prey") -> int:
    with HistoryStore(data_paths().ensure().history_db) as store:
        chat = store.create_conversation(title)
        store.add_message(chat.id, Role.USER, "What is a kestrel?")
        store.add_message(chat.id, Role.ASSISTANT, "A small falcon.\x1b]52;c;aGk=\x07")
        return chat.id


def _export_to(target: Path, *extra: str) -> subprocess.CompletedProcess:
    return kestrel("export", str(_saved_chat()), "--format", "json", "-o", str(target), *extra, timeout=60)


def _refused(result: subprocess.CompletedProcess, *words: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert_no_traceback(result)
    for word in words:
        assert word in result.stderr, result.stderr


def device(folder: Path) -> Path:
    """A character device that discards nothing and fills at once (/dev/full's kind).

    As root (where replacing the real one is what the bug did) it is a node of our own in
    folder; otherwise /dev/full itself, which a user cannot replace anyway.
    """
    if os.geteuid() != 0:
        return Path("/dev/full")
    node = folder / "full"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    return node


def test_a_fifo_is_refused_and_left_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    _refused(_export_to(fifo), str(fifo), "named pipe")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_device_is_refused_and_left_a_device(tmp_path: Path) -> None:
    node = device(tmp_path)
    _refused(_export_to(node), str(node), "device")
    assert stat.S_ISCHR(os.lstat(node).st_mode)


def test_a_socket_and_a_folder_are_refused(tmp_path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(tmp_path / "sock"))
        _refused(_export_to(tmp_path / "sock"), "socket")
    assert stat.S_ISSOCK(os.lstat(tmp_path / "sock").st_mode)
    (tmp_path / "folder").mkdir()
    _refused(_export_to(tmp_path / "folder", "--force"), "folder")
    assert (tmp_path / "folder").is_dir() and not any((tmp_path / "folder").iterdir())


def test_a_link_is_not_written_through_even_with_force(tmp_path: Path) -> None:
    other = tmp_path / "someone else's.txt"
    other.write_text("keep me")
    other.chmod(0o644)
    link = tmp_path / "chat.json"
    link.symlink_to(other)
    for extra in ((), ("--force",)):
        _refused(_export_to(link, *extra), str(link), "link")
        assert link.is_symlink() and os.readlink(link) == str(other)
        assert other.read_text() == "keep me" and stat.S_IMODE(other.stat().st_mode) == 0o644
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere")
    _refused(_export_to(dangling), "link")
    assert not (tmp_path / "nowhere").exists()


def test_an_existing_file_is_kept_unless_force_and_then_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "chat.json"
    target.write_text("my notes")
    target.chmod(0o640)
    _refused(_export_to(target), str(target), "already exists", "--force")
    assert target.read_text() == "my notes"
    forced = _export_to(target, "--force")
    assert forced.returncode == 0, forced.stderr
    assert target.read_text(encoding="utf-8").startswith("{") and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")], "no temporary file left behind"


def test_a_new_file_gets_the_usual_mode(tmp_path: Path) -> None:
    target = tmp_path / "new.json"
    old = os.umask(0o022)
    try:
        assert _export_to(target).returncode == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_a_missing_folder_is_said_and_not_made(tmp_path: Path) -> None:
    target = tmp_path / "no such folder" / "deeper" / "chat.json"
    _refused(_export_to(target), str(tmp_path / "no such folder" / "deeper"), "does not exist")
    assert not (tmp_path / "no such folder").exists()


def test_standard_output_that_is_full_is_said_without_a_traceback() -> None:
    chat = _saved_chat()
    with open("/dev/full", "wb") as full:
        result = subprocess.run([sys.executable, "-m", "app", "export", str(chat)], cwd=ROOT, stdout=full,
                                stderr=subprocess.PIPE, text=True, encoding="utf-8", timeout=60)
    assert result.returncode == 7, result.stderr
    assert "Traceback" not in result.stderr and "space" in result.stderr and "Error" not in result.stderr


@pytest.mark.parametrize("listing", [False, True])
def test_standard_output_closed_early_is_no_traceback(listing: bool) -> None:
    chat = _saved_chat()
    args = [sys.executable, "-m", "app", "export"] + ([] if listing else [str(chat)])
    process = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader ends before Kestrel writes, as `| head -c 0` does
    with process.stderr:
        stderr = process.stderr.read().decode("utf-8", "replace")
    code = process.wait(timeout=60)
    assert "Traceback" not in stderr and "Exception" not in stderr and "Error" not in stderr, stderr
    assert (code, stderr) == (0, ""), "output cut short by its reader is what the reader wanted"


def test_titles_are_listed_without_their_control_characters() -> None:
    chat = _saved_chat(TITLE)
    listed = kestrel("export")
    assert listed.returncode == 0
    line = next(line for line in listed.stdout.splitlines() if line.lstrip().startswith(str(chat)))
    assert "\x1b" not in line and "\x07" not in line and "\x9b" not in line
    assert "Birds" in line and "prey" in line and "\\x1b" in line


def test_a_chat_printed_to_a_terminal_shows_control_characters_escaped_and_a_pipe_gets_them_as_they_are() -> None:
    chat = _saved_chat(TITLE)
    piped = kestrel("export", str(chat))
    assert piped.returncode == 0 and "\x1b]52;c;aGk=\x07" in piped.stdout, "a pipe gets the file as it is"
    controller, terminal = os.openpty()
    try:
        result = subprocess.run([sys.executable, "-m", "app", "export", str(chat)], cwd=ROOT, stdout=terminal,
                                stderr=subprocess.PIPE, timeout=60)
        os.close(terminal)
        shown = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the terminal's other end is closed and all is read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(controller)
    assert result.returncode == 0, result.stderr
    text = shown.decode("utf-8")
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
    assert "A small falcon.\\x1b]52;c;aGk=\\x07" in text


@pytest.mark.parametrize("make", ["fifo", "device", "folder"])
def test_importing_what_is_not_a_file_is_refused_at_once(tmp_path: Path, make: str) -> None:
    if make == "fifo":
        os.mkfifo(tmp_path / "chat.json")  # opening it to read would wait for a writer forever
        source = tmp_path / "chat.json"
    else:
        source = device(tmp_path) if make == "device" else tmp_path
    result = kestrel("import", str(source), timeout=60)
    assert result.returncode == 3 and str(source) in result.stderr and "not a file" in result.stderr, result.stderr
    assert_no_traceback(result)
