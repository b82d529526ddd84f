"""The campaign's export-targets category: `kestrel export` aimed at what it must not write.

A FIFO, a link to another file, a device, a folder, a file already there (with and
without --force), a folder that does not exist, and standard output that is full or
closed. Each case checks the exit status of the README's table, a message in plain
words, no traceback and no hang, and that what was at the target (and what a link points
to) is as it was, or, with --force, replaced with its mode kept.
"""

from __future__ import annotations

import os
import shlex
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.robustness_kit import (
    PYTHON, Case, Context, app_env, check_finished, check_plain_message, history_of, run)

CATEGORY = "export-targets"
Snapshot = tuple[str, bytes | str, int]  # kind, content or link target, mode


@dataclass(frozen=True)
class Target:
    """One case: make(folder) -> the path given to -o (None: standard output, see shell)."""

    name: str
    make: Callable[[Path], Path | None]
    expect: int
    words: str  # what the message must say
    force: bool = False
    shell: str = ""  # for standard output: how the shell redirects it ({cmd} is the export)


def _saved_chat(home: Path) -> int:
    from app.core.conversation import Role
    from app.core.store.history import HistoryStore

    with HistoryStore(history_of(home)) as store:
        chat = store.create_conversation("Birds of prey")
        store.add_message(chat.id, Role.USER, "What is a kestrel?")
        store.add_message(chat.id, Role.ASSISTANT, "A small falcon. " * 2000)  # more than a pipe's buffer
        return chat.id


def _fifo(folder: Path) -> Path:
    os.mkfifo(folder / "pipe.json")
    return folder / "pipe.json"


def _link(folder: Path) -> Path:
    (folder / "someone else's.txt").write_bytes(b"keep me")
    (folder / "someone else's.txt").chmod(0o644)
    (folder / "chat.json").symlink_to(folder / "someone else's.txt")
    return folder / "chat.json"


def _dangling(folder: Path) -> Path:
    (folder / "chat.json").symlink_to(folder / "nowhere.json")
    return folder / "chat.json"


def _device(folder: Path) -> Path:
    """/dev/full's kind: as root a node of our own (the bug replaced the real one), else /dev/full."""
    if os.geteuid() != 0:
        return Path("/dev/full")
    os.mknod(folder / "full", 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    return folder / "full"


def _existing(folder: Path) -> Path:
    (folder / "chat.json").write_bytes(b"my notes")
    (folder / "chat.json").chmod(0o640)
    return folder / "chat.json"


def _folder(folder: Path) -> Path:
    (folder / "exports").mkdir()
    return folder / "exports"


def targets() -> list[Target]:
    return [
        Target("a FIFO", _fifo, 2, "named pipe"),
        Target("a link to another file", _link, 2, "link"),
        Target("a link to another file, --force", _link, 2, "link", force=True),
        Target("a dangling link", _dangling, 2, "link"),
        Target("a device (/dev/full)", _device, 2, "device", force=True),
        Target("a folder", _folder, 2, "folder", force=True),
        Target("an existing file", _existing, 2, "--force"),
        Target("an existing file, --force", _existing, 0, "Wrote chat", force=True),
        Target("a folder that does not exist", lambda folder: folder / "no such folder" / "chat.json", 2,
               "does not exist"),
        Target("standard output full (/dev/full)", lambda _folder: None, 7, "space",
               shell="exec {cmd} > /dev/full"),
        Target("standard output closed (| true)", lambda _folder: None, 0, "",
               shell="{cmd} | true; exit ${{PIPESTATUS[0]}}"),
    ]


def _snapshot(path: Path) -> Snapshot | None:
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(found.st_mode):
        return "link", os.readlink(path), 0
    if stat.S_ISREG(found.st_mode):
        return "file", path.read_bytes(), stat.S_IMODE(found.st_mode)
    return stat.filemode(found.st_mode)[0], b"", stat.S_IMODE(found.st_mode)


def _everything(folder: Path) -> dict[str, Snapshot | None]:
    """What is in the case's folder, links and their targets included (the home aside)."""
    return {p.name: _snapshot(p) for p in folder.iterdir() if p.name != "kestrel home ü"}


def _run_case(ctx: Context, target: Target) -> Case:
    case = Case(CATEGORY, target.name)
    home = ctx.home(f"export {target.name}")
    folder = home.parent
    chat = _saved_chat(home)
    path = target.make(folder)
    export = [PYTHON, "-m", "app", "export", str(chat), "--format", "json"]
    if path is not None:
        export += ["-o", str(path)] + (["--force"] if target.force else [])
    args = export if not target.shell else ["bash", "-c", target.shell.format(cmd=shlex.join(export))]
    before = _everything(folder)
    device_before = _snapshot(path) if path is not None and not path.is_relative_to(folder) else None
    done = run(args, env=app_env(home))
    check_finished(case, done, {target.expect})
    if target.words:
        check_plain_message(case, done)
        case.check(target.words in done.stderr,
                   f"the message does not say {target.words!r}: {done.stderr.strip()[:160]}")
    else:
        case.check(not done.stderr.strip(), f"a message where none is due: {done.stderr.strip()[:160]}")
    after = _everything(folder)
    if target.expect == 0 and path is not None:
        kind, content, mode = after[path.name] or ("gone", b"", 0)
        case.check(kind == "file" and isinstance(content, bytes) and content.startswith(b"{"),
                   f"{path.name} was not replaced with the export")
        case.check(mode == before[path.name][2] if before[path.name] else False,
                   f"{path.name}'s mode became {mode:o}")
        before.pop(path.name), after.pop(path.name)
    changed = sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    case.check(not changed, f"changed beside it: {', '.join(changed)}")
    if device_before is not None:
        case.check(_snapshot(path) == device_before, f"{path} changed")  # type: ignore[arg-type]
    return case


def cat_export_targets(ctx: Context) -> list[Case]:
    if os.name == "nt":
        case = Case(CATEGORY, "skipped")
        case.detail["skipped"] = "FIFOs, devices and /dev/full are POSIX"
        return [case]
    return [_run_case(ctx, target) for target in ctx.pick(targets(), 3, CATEGORY)]
