"""The campaign's hostile folders (issue 28): `models add` on folders that fight back, and
output into a pipe whose reader went away.

Each case runs the real command (`python -m app models add FOLDER`, in a fresh home) on a
folder with one good model beside the hostile thing: a tree 1,500 levels deep, loops of
links, a subfolder whose path is too long to open, a .gguf that is a named pipe, names
with control characters. Goals: exit 0 with the good model added (and listed after), the
hostile thing named with why in plain words, no traceback, no raw control character on
the terminal, within 5 s and 500 MB. Into a closed pipe, `models list`, `doctor` and
`chat` end with status 0, as the README says, and say nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from benchmarks.robustness_kit import (
    HANG_S, LIMIT_S, PYTHON, ROOT, Case, Context, Finished, app_env, chat, check_finished, check_plain_message,
    run)
from tests.helpers.deep_trees import remove_tree
from tests.helpers.tiny_gguf import build_tiny_gguf

CATEGORY = "hostile-folders"
EXIT_READER_GONE = 0
# What a terminal acts on instead of showing: ESC, BEL, CSI, a right-to-left override.
CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e")

Build = Callable[[Path, Path], str]  # (folder, the tiny model) -> words stderr must hold


def _deep(folder: Path, model: Path) -> str:
    below = folder
    for _ in range(1500):  # one level at a time: os.makedirs recurses per level
        below = below / "d"
        below.mkdir()
    shutil.copy(model, below / "too-deep.gguf")
    return "folders below"


def _link_loops(folder: Path, model: Path) -> str:
    (folder / "itself").symlink_to("itself")
    (folder / "ping").symlink_to("pong")
    (folder / "pong").symlink_to("ping")
    (folder / "back up").symlink_to(".")
    return "a loop of links"


def _too_long(folder: Path, model: Path) -> str:
    """A subfolder whose path opens but nothing inside it does: unreadable even for root."""
    name, fd, path = "x" * 100, os.open(folder, os.O_RDONLY), folder
    try:
        while len(str(path / name)) < 3990:
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd, path = inner, path / name
        os.mkdir("y" * (4090 - len(str(path)) - 1), dir_fd=fd)
    finally:
        os.close(fd)
    return "too long to open"


def _fifo(folder: Path, model: Path) -> str:
    os.mkfifo(folder / "waiting.gguf")
    os.mkfifo(folder / "subfolder")
    return "not a regular file (a named pipe)"


def _control_names(folder: Path, model: Path) -> str:
    # Spaces between: three escapes in a row (\x07\x0a\x9b) read as a Python bytes repr to the kit.
    (folder / "evil\x1b]0;owned\x07 \n \x9b\u202e.gguf").write_bytes(b"GGUF but not really")
    build_tiny_gguf(folder / "titled.gguf", name="Title \x1b[2J\x1b]0;owned\x07 \u202eend")
    return "evil\\x1b]0;owned\\x07 \\x0a \\x9b\\u202e.gguf"


FOLDERS: list[tuple[str, Build]] = [
    ("a folder 1,500 levels deep", _deep),
    ("loops of links beside a model", _link_loops),
    ("a subfolder too long to open", _too_long),
    ("a .gguf and a folder that are named pipes", _fifo),
    ("names with control characters", _control_names),
]


def cat_hostile_folders(ctx: Context) -> list[Case]:
    cases = [(name, lambda case, name=name, build=build: _add_case(ctx, case, name, build))
             for name, build in FOLDERS]
    cases += [("models list into a closed pipe", lambda case: _closed_case(ctx, case, ["models", "list"])),
              ("doctor into a closed pipe", lambda case: _closed_case(ctx, case, ["doctor"]))]
    if not ctx.sample:  # a few seconds: the engine starts
        cases.append(("chat into a closed pipe", lambda case: _closed_case(
            ctx, case, chat(ctx.tiny, "--max-tokens", "2000", "--ctx", "4096", message="Tell a long story")[3:],
            limit_s=15)))
    results = []
    for name, check in ctx.pick(cases, 3, CATEGORY):
        case = Case(CATEGORY, name)
        check(case)
        results.append(case)
    return results


def _add_case(ctx: Context, case: Case, name: str, build: Build) -> None:
    work = ctx.folder(name)
    shelf = work / "shelf"
    shelf.mkdir()
    shutil.copy(ctx.tiny, shelf / "good.gguf")
    try:
        _add_and_check(case, shelf, build(shelf, ctx.tiny), app_env(work / "home"))
    finally:
        remove_tree(shelf)  # shutil.rmtree, at the campaign's end, recurses once per level


def _add_and_check(case: Case, shelf: Path, words: str, env: dict[str, str]) -> None:
    done = run([PYTHON, "-m", "app", "models", "add", str(shelf)], env=env)
    check_finished(case, done, {0})
    check_plain_message(case, done)
    added = done.stdout.split()
    case.check("good" in added, f"the good model beside it was not added (stdout: {done.stdout.strip()!r})")
    case.check(words in done.stderr, f"the problem was not named ({words!r}): {done.stderr[:300]!r}")
    shown = [char for char in CONTROLS if char in done.stdout + done.stderr]
    case.check(not shown, f"raw control characters reached the terminal: {shown!r}")
    listing = run([PYTHON, "-m", "app", "models", "list", "--json"], env=env)
    ids = [json.loads(line)["id"] for line in listing.stdout.splitlines() if line.startswith("{")]
    case.check(listing.code == 0 and "good" in ids, f"models list after it: exit {listing.code}, ids {ids}")
    case.detail["added"] = added


def _closed_case(ctx: Context, case: Case, args: list[str], *, limit_s: float = LIMIT_S) -> None:
    home = ctx.home(" ".join(args[:2]))
    done = into_closed_pipe([PYTHON, "-m", "app", *args], env=app_env(home))
    check_finished(case, done, {EXIT_READER_GONE}, limit_s=limit_s)
    case.check(done.stderr == "", f"said something into a closed pipe: {done.stderr[:200]!r}")


def into_closed_pipe(args: list[str], *, env: dict[str, str]) -> Finished:
    """Run args with standard output a pipe whose reading end is already closed (as after
    `| head -c 10` has read its fill): how it ended, its time, and its tree's peak memory."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    started = time.monotonic()
    try:
        process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=write_end, stderr=subprocess.PIPE,
                                   stdin=subprocess.DEVNULL)
    finally:
        os.close(write_end)
    peak, seen = 0, {}
    deadline = started + HANG_S
    while process.poll() is None and time.monotonic() < deadline:
        try:
            tree = [psutil.Process(process.pid), *psutil.Process(process.pid).children(recursive=True)]
            seen.update((p.pid, p) for p in tree)
            peak = max(peak, sum(p.memory_info().rss for p in tree))
        except psutil.Error:
            pass
        time.sleep(0.02)
    code = process.poll()
    if code is None:
        process.kill()
    stderr = process.communicate()[1].decode("utf-8", "replace")
    seconds = time.monotonic() - started
    time.sleep(0.5 if seen else 0)
    strays = [p for pid, p in seen.items() if pid != process.pid and _running(p)]
    return Finished(code, "", stderr, seconds, peak / 2**20, "Traceback" in stderr, len(strays))


def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
