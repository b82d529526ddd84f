"""write_user_file: a file the user named is written new, or replaced when asked, and nothing
else: no link followed, no device, pipe, socket or folder replaced, no folder made up."""

from __future__ import annotations

import errno
import os
import socket
import stat
import time
from pathlib import Path

import pytest

from app.core import files
from app.core.files import Refusal, TargetRefused, write_user_file

posix_only = pytest.mark.skipif(os.name == "nt", reason="FIFOs, devices and sockets are POSIX")


def _refused(path: Path, refusal: Refusal, *, replace: bool = False) -> TargetRefused:
    with pytest.raises(TargetRefused) as refused:
        write_user_file(path, b"new", replace=replace)
    assert refused.value.refusal is refusal and refused.value.path == path
    return refused.value


def _no_temporaries(folder: Path) -> None:
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_a_new_file_is_written_with_the_umask_mode(tmp_path: Path) -> None:
    target = tmp_path / "chat ü.md"
    old = os.umask(0o027)
    try:
        write_user_file(target, b"hello", replace=False)
    finally:
        os.umask(old)
    assert target.read_bytes() == b"hello"
    if os.name != "nt":
        assert stat.S_IMODE(target.stat().st_mode) == 0o640
    _no_temporaries(tmp_path)


def test_an_existing_file_is_refused_unless_replace_and_then_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "chat.md"
    target.write_bytes(b"mine")
    target.chmod(0o604)
    _refused(target, Refusal.EXISTS)
    assert target.read_bytes() == b"mine"
    write_user_file(target, b"new", replace=True)
    assert target.read_bytes() == b"new"
    if os.name != "nt":
        assert stat.S_IMODE(target.stat().st_mode) == 0o604
    _no_temporaries(tmp_path)


def test_a_link_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    other = tmp_path / "other.txt"
    other.write_bytes(b"keep")
    link = tmp_path / "chat.md"
    link.symlink_to(other)
    for replace in (False, True):
        _refused(link, Refusal.LINK, replace=replace)
    assert link.is_symlink() and other.read_bytes() == b"keep"
    dangling = tmp_path / "dangling.md"
    dangling.symlink_to(tmp_path / "nowhere")
    _refused(dangling, Refusal.LINK)
    assert not (tmp_path / "nowhere").exists()
    _no_temporaries(tmp_path)


def test_a_folder_is_refused(tmp_path: Path) -> None:
    assert _refused(tmp_path, Refusal.NOT_A_FILE, replace=True).what == "a folder"


@posix_only
def test_a_fifo_a_socket_and_a_device_are_refused_as_what_they_are(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    assert _refused(tmp_path / "fifo", Refusal.NOT_A_FILE, replace=True).what == "a named pipe"
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode)
    with socket.socket(socket.AF_UNIX) as bound:
        bound.bind(str(tmp_path / "sock"))
        assert _refused(tmp_path / "sock", Refusal.NOT_A_FILE, replace=True).what == "a socket"
    from tests.cli.test_export_targets import device

    node = device(tmp_path)
    assert _refused(node, Refusal.NOT_A_FILE, replace=True).what == "a device"
    assert stat.S_ISCHR(os.lstat(node).st_mode)
    _no_temporaries(tmp_path)


def test_a_missing_folder_is_refused_and_not_made(tmp_path: Path) -> None:
    _refused(tmp_path / "gone" / "chat.md", Refusal.NO_FOLDER)
    assert not (tmp_path / "gone").exists()
    (tmp_path / "a file").write_bytes(b"x")
    _refused(tmp_path / "a file" / "chat.md", Refusal.NO_FOLDER)


def test_a_file_that_appears_while_writing_is_not_replaced(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "chat.md"
    real = files._create_temp

    def create_then_race(folder: Path, name: str):
        made = real(folder, name)
        target.write_bytes(b"someone else's")  # between the check and the rename
        return made

    monkeypatch.setattr(files, "_create_temp", create_then_race)
    _refused(target, Refusal.EXISTS)
    assert target.read_bytes() == b"someone else's"
    _no_temporaries(tmp_path)


@posix_only
def test_a_file_system_without_hard_links_still_gets_the_file(tmp_path: Path, monkeypatch) -> None:
    def no_links(*_args) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    write_user_file(tmp_path / "chat.md", b"fat32", replace=False)
    assert (tmp_path / "chat.md").read_bytes() == b"fat32"
    _refused(tmp_path / "chat.md", Refusal.EXISTS)
    _no_temporaries(tmp_path)


def test_a_full_disk_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "chat.md"
    target.write_bytes(b"old")

    def full(_fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space"):
        write_user_file(target, b"new", replace=True)
    assert target.read_bytes() == b"old"
    _no_temporaries(tmp_path)


# --- issue 35, item 15: what a killed write left beside its target -------------------------------


def _left(folder: Path, name: str, age_s: float, tag: str = "0badcafe") -> Path:
    temp = folder / f".{name}.{tag}.tmp"
    temp.write_bytes(b"half")
    stamp = time.time() - age_s
    os.utime(temp, (stamp, stamp))
    return temp


def test_an_abandoned_temporary_of_the_target_goes_and_nothing_else(tmp_path: Path) -> None:
    name = "a..b (1)[x].md"  # dots and brackets: the pattern is the name, not a regular expression
    abandoned = _left(tmp_path, name, 60)
    kept = [_left(tmp_path, name, 2, tag="0c0ffee0"),  # written to a moment ago: a writer may be at it
            _left(tmp_path, "other.md", 7200),  # another target's: its own next write sees to it
            _left(tmp_path, name, 7200, tag="0BADCAFE"),  # not a name Kestrel makes
            _left(tmp_path, name, 7200, tag="0badcafe0"),
            _left(tmp_path, "a.b (1)[x].md", 7200)]
    (tmp_path / ".notes.tmp").write_bytes(b"mine")

    write_user_file(tmp_path / name, b"new", replace=False)

    assert not abandoned.exists() and all(path.exists() for path in kept)
    assert (tmp_path / ".notes.tmp").read_bytes() == b"mine" and (tmp_path / name).read_bytes() == b"new"


@posix_only
def test_a_temporary_whose_writer_holds_its_lock_stays_however_old(tmp_path: Path) -> None:
    import fcntl

    held = _left(tmp_path, "chat.md", 7200)
    fd = os.open(held, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        write_user_file(tmp_path / "chat.md", b"new", replace=False)
        assert held.exists()
    finally:
        os.close(fd)


@posix_only
def test_without_locks_only_an_hour_old_temporary_counts_as_abandoned(tmp_path: Path, monkeypatch) -> None:
    import fcntl

    def no_locks(_fd: int, _operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    recent, old = _left(tmp_path, "chat.md", 600), _left(tmp_path, "chat.md", 7200, tag="00000001")

    write_user_file(tmp_path / "chat.md", b"new", replace=False)

    assert recent.exists() and not old.exists() and (tmp_path / "chat.md").read_bytes() == b"new"


@posix_only
def test_a_link_at_a_temporary_name_is_left_and_its_target_untouched(tmp_path: Path) -> None:
    mine = tmp_path / "mine.txt"
    mine.write_bytes(b"mine")
    link = tmp_path / ".chat.md.0badcafe.tmp"
    link.symlink_to(mine)
    stamp = time.time() - 7200
    os.utime(link, (stamp, stamp), follow_symlinks=False)

    write_user_file(tmp_path / "chat.md", b"new", replace=False)

    assert link.is_symlink() and mine.read_bytes() == b"mine"
