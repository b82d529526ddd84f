"""Paths that are not a model file or folder: pipes, devices, link loops, no permission.

Issue 9, defect 9: a named pipe given as the model hung (opening it waits for a writer);
a symbolic-link loop ended in a traceback. Each must give a message at once.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from app.library.model_files.gguf_info import ModelFileError, read_gguf_info
from app.library.model_files.model_format import detect_format, read_onnx_folder
from app.library.models import ModelLibrary

TINY_ONNX = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-onnx"
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
needs_symlinks = pytest.mark.skipif(os.name == "nt", reason="symbolic links need extra rights on Windows")
as_root = hasattr(os, "geteuid") and os.geteuid() == 0


def _error(read, path: Path) -> ModelFileError:
    with pytest.raises(ModelFileError) as caught:
        read(path)
    assert caught.value.path == path
    return caught.value


@needs_fifo
@pytest.mark.timeout(20)  # before the fix, opening the pipe waited for ever
@pytest.mark.parametrize("name", ["model.gguf", "model"])
@pytest.mark.parametrize("read", [detect_format, read_gguf_info, read_onnx_folder])
def test_a_named_pipe_is_not_opened(tmp_path: Path, name: str, read) -> None:
    fifo = tmp_path / name
    os.mkfifo(fifo)

    error = _error(read, fifo)

    assert error.kind == "not_a_file"
    assert f"{fifo} is not a regular file but a named pipe" in error.message


@pytest.mark.parametrize("read", [detect_format, read_gguf_info])
def test_a_device_is_not_a_model(read) -> None:
    device = Path(os.devnull)
    if not device.exists() or device.is_file():
        pytest.skip("no device file to name here")

    error = _error(read, device)

    assert error.kind == "not_a_file"
    assert "not a regular file but a device" in error.message


@needs_symlinks
@pytest.mark.parametrize("read", [detect_format, read_gguf_info, read_onnx_folder])
def test_a_symlink_loop(tmp_path: Path, read) -> None:
    (tmp_path / "a.gguf").symlink_to(tmp_path / "b.gguf")
    (tmp_path / "b.gguf").symlink_to(tmp_path / "a.gguf")

    error = _error(read, tmp_path / "a.gguf")

    assert error.kind == "unreadable"
    assert "symbolic link" in error.message and "loop" in error.message


@needs_symlinks
@pytest.mark.parametrize("read", [detect_format, read_gguf_info])
def test_a_link_to_nothing_names_where_it_points(tmp_path: Path, read) -> None:
    link = tmp_path / "model.gguf"
    link.symlink_to(tmp_path / "moved away.gguf")

    error = _error(read, link)

    assert error.kind == "missing"
    assert "moved away.gguf" in error.message and "does not exist" in error.message


@needs_symlinks
def test_a_link_to_a_model_still_works(tmp_path: Path, tiny_model: Path) -> None:
    link = tmp_path / "linked.gguf"
    link.symlink_to(tiny_model)

    assert detect_format(link) == "gguf"
    assert read_gguf_info(link).architecture == "llama"


@needs_symlinks
def test_finding_a_model_by_a_looping_path_is_no_match(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")

    assert ModelLibrary(tmp_path / "models").find(str(tmp_path / "a")) is None


@pytest.mark.skipif(os.name == "nt" or as_root,
                    reason="root may read any file, so a file it cannot read cannot be made here"
                    if as_root else "POSIX permissions")
def test_a_file_without_read_permission(tmp_path: Path, tiny_model: Path) -> None:
    locked = Path(shutil.copy(tiny_model, tmp_path / "locked.gguf"))
    locked.chmod(0)
    try:
        error = _error(read_gguf_info, locked)
    finally:
        locked.chmod(0o600)

    assert error.kind == "unreadable"
    assert "Permission denied" in error.message and "that you may read it" in error.message


@pytest.mark.skipif(os.name == "nt" or as_root,
                    reason="root may read any folder, so a folder it cannot read cannot be made here"
                    if as_root else "POSIX permissions")
def test_a_folder_without_read_permission(tmp_path: Path) -> None:
    folder = Path(shutil.copytree(TINY_ONNX, tmp_path / "locked onnx"))
    folder.chmod(0)
    try:
        error = _error(detect_format, folder)
    finally:
        folder.chmod(0o700)

    assert error.kind == "unreadable"
    assert "Permission denied" in error.message


@pytest.mark.parametrize("read", [detect_format, read_gguf_info])
def test_a_refused_open_says_so(tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch,
                                read) -> None:
    # Runs where the two tests above cannot (as root): the same refusal, simulated at open().
    path = Path(shutil.copy(tiny_model, tmp_path / "model"))  # no suffix: detect_format opens it
    real_open = Path.open

    def refuse(self: Path, *args, **kwargs):
        if self == path:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", refuse)

    error = _error(read, path)

    assert error.kind == "unreadable"
    assert "(Permission denied)" in error.message
