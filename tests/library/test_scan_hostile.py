"""Folders that fight back (issue 28): 1,500 levels deep, loops of links, paths too long,
folders that cannot be read or vanish, FIFOs named like models. The scan names each with
why and finds the model beside it."""

from __future__ import annotations

import errno
import inspect
import os
import shutil
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.library.scan import MAX_DEPTH, examine, scan_folder
from tests.helpers.deep_trees import deep_folder, long_path_folder, remove_tree
from tests.library.test_scan import ONNX_MODEL, write_gguf

posix_only = pytest.mark.skipif(os.name == "nt", reason="links, FIFOs and PATH_MAX as on Linux and macOS")
# Windows opens no path over 260 characters unless long paths are turned on for the machine.
deep = pytest.mark.skipif(os.name == "nt", reason="paths of thousands of characters need long-path support on Windows")


@pytest.fixture
def cleaned(tmp_path: Path) -> Iterator[Path]:
    """tmp_path, emptied at the end however deep it went (pytest's own clean-up would
    recurse once per level, fail, and warn)."""
    yield tmp_path
    remove_tree(tmp_path)


def reasons(scan) -> dict[Path, str]:
    return dict(scan.skipped)


@deep
def test_a_folder_1500_levels_deep_is_looked_through_down_to_the_limit_and_says_where_it_stopped(cleaned: Path) -> None:
    tmp_path = cleaned
    write_gguf(tmp_path / "top.gguf", name="Top")
    bottom = deep_folder(tmp_path, 1500)
    write_gguf(bottom / "too-deep.gguf")
    write_gguf(tmp_path.joinpath(*["d"] * 40) / "deep.gguf", name="Deep")

    scan = scan_folder(tmp_path)

    assert sorted(f.path.name for f in scan.found) == ["deep.gguf", "top.gguf"]
    stopped = tmp_path.joinpath(*["d"] * (MAX_DEPTH + 1))
    assert list(reasons(scan)) == [stopped]
    assert reasons(scan)[stopped] == (f"it is more than {MAX_DEPTH} folders below {tmp_path}, deeper than "
                                      "Kestrel looks; add that folder itself to look in it")


@deep
def test_the_scan_uses_no_recursion_per_level(cleaned: Path) -> None:
    """Under a recursion limit far below the depth it looks to, the scan still ends."""
    write_gguf(deep_folder(cleaned, MAX_DEPTH) / "bottom.gguf")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(150 + len(inspect.stack()))
    try:
        scan = scan_folder(cleaned)
    finally:
        sys.setrecursionlimit(limit)
    assert [f.path.name for f in scan.found] == ["bottom.gguf"]


@deep
def test_an_onnx_folder_with_a_deep_tree_inside_is_measured(cleaned: Path) -> None:
    model = cleaned / "onnx"
    shutil.copytree(ONNX_MODEL, model)
    (deep_folder(model, 1500) / "data.bin").write_bytes(b"x" * 10)
    found = examine(model)
    assert found.format == "onnx" and found.size == sum(
        f.stat().st_size for f in ONNX_MODEL.iterdir() if f.is_file()) + 10


def _emulate_locked(monkeypatch: pytest.MonkeyPatch, locked: Path) -> None:
    """What chmod 0 does to a folder for anyone but root (the tests run as root): it can
    be seen in its parent, but neither listed nor looked into."""
    real_stat, real_scandir, real_listdir = os.stat, os.scandir, os.listdir

    def denied(path: object) -> None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))

    def inside(path: object) -> bool:
        return isinstance(path, (str, os.PathLike)) and Path(os.fspath(path)).parent == locked

    def fake_stat(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if inside(path):
            denied(path)
        return real_stat(path, *args, **kwargs)

    def fake_scandir(path=".", *args, **kwargs):  # type: ignore[no-untyped-def]
        if Path(os.fspath(path)) == locked:
            denied(path)
        return real_scandir(path, *args, **kwargs)

    def fake_listdir(path=".", *args, **kwargs):  # type: ignore[no-untyped-def]
        if Path(os.fspath(path)) == locked:
            denied(path)
        return real_listdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", fake_stat)
    monkeypatch.setattr(os, "scandir", fake_scandir)
    monkeypatch.setattr(os, "listdir", fake_listdir)


def test_a_folder_that_may_not_be_read_is_named_and_the_model_beside_it_found(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_gguf(tmp_path / "good.gguf")
    locked = tmp_path / "locked"
    write_gguf(locked / "inside.gguf")
    _emulate_locked(monkeypatch, locked)

    scan = scan_folder(tmp_path)

    assert [f.path.name for f in scan.found] == ["good.gguf"]
    assert reasons(scan) == {locked: "it could not be read: permission denied (your user may not open it)"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's PATH_MAX of 4,096 bytes")
def test_a_folder_whose_path_is_too_long_to_open_is_named_and_the_rest_found(cleaned: Path) -> None:
    tmp_path = cleaned
    write_gguf(tmp_path / "good.gguf")
    far = long_path_folder(tmp_path, 4090)

    scan = scan_folder(tmp_path)

    assert [f.path.name for f in scan.found] == ["good.gguf"]
    assert list(reasons(scan)) == [far]
    assert reasons(scan)[far].startswith("its path is too long to open (4,090 characters")


@posix_only
def test_loops_of_links_are_named_and_the_model_beside_them_found(tmp_path: Path) -> None:
    write_gguf(tmp_path / "good.gguf")
    (tmp_path / "itself").symlink_to("itself")
    (tmp_path / "ping").symlink_to("pong")
    (tmp_path / "pong").symlink_to("ping")
    (tmp_path / "model.gguf").symlink_to("model.gguf")
    (tmp_path / "up").symlink_to(".")  # a link back to a folder already looked in: not a problem

    scan = scan_folder(tmp_path)

    assert [f.path.name for f in scan.found] == ["good.gguf"]
    loop = "a link that leads back to itself (a loop of links), so there is nothing there to read"
    assert reasons(scan) == {tmp_path / name: loop for name in ("itself", "model.gguf", "ping", "pong")}


@posix_only
def test_a_fifo_named_like_a_model_or_a_folder_is_never_opened(tmp_path: Path) -> None:
    write_gguf(tmp_path / "good.gguf")
    os.mkfifo(tmp_path / "pipe.gguf")
    os.mkfifo(tmp_path / "models")

    scan = scan_folder(tmp_path)  # opening either would wait for a writer forever

    assert [f.path.name for f in scan.found] == ["good.gguf"]
    assert reasons(scan) == {tmp_path / "pipe.gguf": "not a regular file (a named pipe), so not a model"}
    assert stat.S_ISFIFO(os.lstat(tmp_path / "pipe.gguf").st_mode)


def test_a_folder_that_goes_away_while_the_scan_runs_is_named(tmp_path: Path) -> None:
    write_gguf(tmp_path / "good.gguf")
    write_gguf(tmp_path / "zz going" / "gone.gguf")

    def remove_it(count: int, folder: Path) -> None:
        if folder == tmp_path:
            shutil.rmtree(tmp_path / "zz going")

    scan = scan_folder(tmp_path, progress=remove_it)

    assert [f.path.name for f in scan.found] == ["good.gguf"]
    assert reasons(scan) == {tmp_path / "zz going": "it went away while Kestrel was looking through the folder"}


def test_a_known_path_that_is_a_loop_of_links_does_not_stop_the_scan(tmp_path: Path) -> None:
    write_gguf(tmp_path / "good.gguf")
    if os.name != "nt":
        (tmp_path / "was-a-model.gguf").symlink_to("was-a-model.gguf")
    scan = scan_folder(tmp_path, known=[tmp_path / "was-a-model.gguf"])
    assert [f.path.name for f in scan.found] == ["good.gguf"]
