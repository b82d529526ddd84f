"""The sockets earlier windows left in the temporary folder when they ended without closing
(killed, crashed) are removed by the next window: only Kestrel's own, only the user's,
only when no process listens on them, and never through a link (issue 28, item 9)."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core.paths import data_paths
from app.ui.single_instance import SingleInstance, server_name

pytestmark = pytest.mark.skipif(os.name == "nt", reason="Windows' local sockets are named pipes, which end with their process")
AN_HOUR_AGO = time.time() - 3600


def left_behind(path: Path, *, old: bool = True) -> Path:
    """A socket file whose process ended without removing it, as a killed window leaves one."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.close()
    if old:
        os.utime(path, (AN_HOUR_AGO, AN_HOUR_AGO))
    return path


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary folder with a short path: a Unix socket's path may not pass ~104 bytes."""
    folder = Path(tempfile.mkdtemp(prefix="k28-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder)


def test_only_kestrels_own_sockets_of_ended_runs_are_removed(short_tmp: Path) -> None:
    from app.ui.single_instance import remove_stale_sockets

    stale = left_behind(short_tmp / "kestrel-0123456789abcdef")
    live = short_tmp / "kestrel-fedcba9876543210"
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind(str(live))
    listening.listen()
    os.utime(live, (AN_HOUR_AGO, AN_HOUR_AGO))
    (short_tmp / "away").mkdir()
    elsewhere = left_behind(short_tmp / "away" / "kestrel-1111111111111111")
    (short_tmp / "kestrel-2222222222222222").symlink_to(elsewhere)
    (short_tmp / "kestrel-3333333333333333").write_text("a file, not a socket")
    (short_tmp / "kestrel-robustness abc").mkdir()
    others = [left_behind(short_tmp / name) for name in ("other-0123456789abcdef", "kestrel-copy",
                                                         "kestrel-0123456789ABCDEF", "kestrel-0123456789abcdef0")]
    just_made = left_behind(short_tmp / "kestrel-4444444444444444", old=False)  # a window starting now
    if os.geteuid() == 0:
        someone_elses = left_behind(short_tmp / "kestrel-5555555555555555")
        os.chown(someone_elses, 65534, 65534)
        others.append(someone_elses)
    try:
        removed = remove_stale_sockets(short_tmp)
    finally:
        listening.close()

    assert removed == [stale] and not os.path.lexists(stale)
    assert live.exists() and elsewhere.exists() and just_made.exists()
    assert (short_tmp / "kestrel-2222222222222222").is_symlink()
    assert (short_tmp / "kestrel-3333333333333333").read_text() == "a file, not a socket"
    assert (short_tmp / "kestrel-robustness abc").is_dir() and all(other.exists() for other in others)


def test_a_starting_window_removes_the_sockets_of_ended_runs(short_tmp: Path, monkeypatch: pytest.MonkeyPatch,
                                                             qapp) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TMPDIR", str(short_tmp))  # where Qt puts its local sockets
    stale = left_behind(short_tmp / "kestrel-0123456789abcdef")
    paths = data_paths().ensure()
    window = SingleInstance(paths)
    try:
        assert window.acquire()
        assert not os.path.lexists(stale)
        assert (short_tmp / server_name(paths)).exists(), "its own socket is made where Qt makes it"
    finally:
        window.release()
