"""`models add FOLDER` on folders that fight back (issue 28), as a user runs it: each problem
is named with why, the good model beside it is added, and nothing is a traceback."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.library.scan import MAX_DEPTH
from tests.cli.test_models_cli import models
from tests.cli.test_models_library_cli import listed
from tests.helpers.deep_trees import deep_folder, long_path_folder, remove_tree
from tests.library.test_scan import write_gguf

posix_only = pytest.mark.skipif(os.name == "nt", reason="links, FIFOs and long paths as on Linux and macOS")
# What a terminal acts on instead of showing: ESC, BEL, a line break, a right-to-left override.
CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e")


@pytest.fixture
def shelf(tmp_path: Path) -> Iterator[Path]:
    """A folder of the user's with one good model, removed at the end however deep it grew."""
    folder = tmp_path / "shelf"
    write_gguf(folder / "good.gguf", name="Good")
    yield folder
    remove_tree(folder)


def skipped_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("kestrel: skipped ")]


@posix_only
def test_a_folder_1500_levels_deep_adds_what_is_within_reach_and_says_where_it_stopped(shelf: Path) -> None:
    write_gguf(deep_folder(shelf, 1500) / "too-deep.gguf")

    result = models("add", str(shelf))

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["good"] and list(listed()) == ["good"]
    [line] = skipped_lines(result.stderr)
    assert line.endswith(f": it is more than {MAX_DEPTH} folders below {shelf}, deeper than Kestrel looks; "
                         "add that folder itself to look in it")


@posix_only
def test_a_loop_of_links_and_a_path_too_long_are_named_and_the_good_model_added(shelf: Path) -> None:
    (shelf / "loop").symlink_to("loop")
    if sys.platform.startswith("linux"):
        far = long_path_folder(shelf, 4090)

    result = models("add", str(shelf))

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["good"] and list(listed()) == ["good"]
    lines = skipped_lines(result.stderr)
    assert f"kestrel: skipped {shelf / 'loop'}: a link that leads back to itself (a loop of links), so there " \
           "is nothing there to read" in lines
    if sys.platform.startswith("linux"):
        [too_long] = [line for line in lines if "its path is too long to open (4,090 characters" in line]
        assert too_long.startswith(f"kestrel: skipped {str(far)[:100]}…{str(far)[-100:]}: ")
    assert "disk is there and has space" not in result.stderr


@posix_only
def test_names_with_control_characters_are_shown_not_obeyed(shelf: Path) -> None:
    (shelf / "evil\x1b]0;owned\x07\n\x9b\u202e.gguf").write_bytes(b"GGUF not really")
    write_gguf(shelf / "titled.gguf", name="Title \x1b[2J\x1b]0;owned\x07 \u202eend")

    added = models("add", str(shelf))
    listing = models("list")

    assert added.returncode == 0 and sorted(added.stdout.split()) == ["good", "titled"]
    [line] = skipped_lines(added.stderr)
    assert "evil\\x1b]0;owned\\x07\\x0a\\x9b\\u202e.gguf" in line
    assert not any(char in added.stderr + listing.stdout for char in CONTROLS)
    assert "Title \\x1b[2J\\x1b]0;owned\\x07 \\u202eend" in listing.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's PATH_MAX of 4,096 bytes")
def test_a_path_too_long_to_open_is_refused_in_words(tmp_path: Path) -> None:
    far = long_path_folder(tmp_path, 4090)
    try:
        result = models("add", str(far / "more" / "model.gguf"))
    finally:
        remove_tree(tmp_path / ("x" * 100))
    assert result.returncode == 3
    assert result.stderr.endswith("is too long a path to open (4,106 characters). Move the model nearer the top "
                                  "of the drive, then add it from there.\n")
    assert len(result.stderr) < 400 and "disk is there and has space" not in result.stderr
