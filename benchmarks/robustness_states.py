"""The robustness campaign's `tampered-states` category: saved chat states someone else put in the folder.

Each case asks `python -m app chat` the same long prompt twice in one home (the first
run is shared: its home is copied for each case), the saved states folder tampered with
in between: a FIFO, a header nested 400,000 deep or of 1 MiB,
the file cut short, another chat's KV bytes under this chat's tokens with every count and
checksum made to fit, or a link to a valid state kept elsewhere. The second run must end
with exit 0 within LIMIT_S, show no traceback and only plain words, give the first run's
answer, evaluate again only what a good state spares (the bad entry beside a good one)
or the whole prompt (the bad entry in the good one's place), and remove the bad entry
(a link itself, never what it points to).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.robustness_kit import (
    UNPLAIN, Case, Context, Finished, _short, app_env, chat, check_finished, run)

CATEGORY = "tampered-states"
PROMPT = "Tell me everything about kestrels and their nests. " * 8
OTHER_PROMPT = "Tell me everything about lighthouses and their keepers. " * 8
LIMIT_S = 30.0  # one chat of the tiny model, engine start included (about 4 s on 2 busy cores)
HANG_AFTER_S = 60.0
SUFFIX = ".kvstate"
_PREFIX = struct.Struct("<9sHI")  # magic, version, header length (app/engine/backends/llama/kv_state.py)


@dataclass(frozen=True)
class Tampering:
    name: str
    # Given the states folder (one good state in it) and the case's work folder: the bad entry made.
    make: Callable[[Path, Path], Path]
    # True: the good state stays beside the bad entry and must still be used.
    good_kept: bool
    # Another chat is asked first and its state left as work/DONOR (three runs, not two).
    needs_other_chat: bool = False


def _states(home: Path) -> Path:
    return home / "cache" / "chat-states"


def _good(folder: Path) -> Path:
    states = sorted(folder.glob(f"*{SUFFIX}"))
    if len(states) != 1:
        raise RuntimeError(f"expected one saved state after the first run, found {len(states)}")
    return states[0]


def _beside(folder: Path, name: str) -> Path:
    """A name of this model's files (the key's hash), so the scan treats it as one of its own."""
    return folder / f"{_good(folder).name.split('-')[0]}-{name}{SUFFIX}"


def _raw_parts(path: Path) -> tuple[bytes, dict, bytes, bytes, bytes]:
    """prefix, header, tokens, KV bytes and whatever follows them, as a reader of the format sees them."""
    data = path.read_bytes()
    magic, version, length = _PREFIX.unpack(data[:_PREFIX.size])
    header = json.loads(data[_PREFIX.size:_PREFIX.size + length])
    tokens_at = _PREFIX.size + length
    body_at = tokens_at + 4 * header["tokens"]
    body_end = body_at + header["state_bytes"]
    return data[:_PREFIX.size], header, data[tokens_at:body_at], data[body_at:body_end], data[body_end:]


def _with_header(prefix: bytes, header: dict, rest: bytes) -> bytes:
    magic, version, _ = _PREFIX.unpack(prefix)
    raw = json.dumps(header).encode()
    return _PREFIX.pack(magic, version, len(raw)) + raw + rest


def make_fifo(folder: Path, _work: Path) -> Path:
    path = _beside(folder, "fifo")
    os.mkfifo(path)
    return path


def make_nested(folder: Path, _work: Path) -> Path:
    magic, version, _ = _PREFIX.unpack(_good(folder).read_bytes()[:_PREFIX.size])
    path = _beside(folder, "nested")
    path.write_bytes(_PREFIX.pack(magic, version, 800_000) + b"[" * 400_000 + b"]" * 400_000)
    return path


def make_huge_header(folder: Path, _work: Path) -> Path:
    """A copy of the good state whose header carries a 1,000,000-character field: under
    the 1 MiB the first reader allowed, far over any header Kestrel writes."""
    prefix, header, tokens, body, rest = _raw_parts(_good(folder))
    header["padding"] = "x" * 1_000_000
    path = _beside(folder, "huge")
    path.write_bytes(_with_header(prefix, header, tokens + body + rest))
    return path


def make_truncated(folder: Path, _work: Path) -> Path:
    path = _good(folder)
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    return path


def make_link(folder: Path, work: Path) -> Path:
    path = _good(folder)
    elsewhere = work / "elsewhere" / path.name  # a valid state, but not one in the folder
    elsewhere.parent.mkdir()
    shutil.move(path, elsewhere)
    path.symlink_to(elsewhere)
    return path


def make_swapped(folder: Path, work: Path) -> Path:
    path = _good(folder)
    swap_body(path, work / DONOR)
    return path


def swap_body(target: Path, donor: Path) -> None:
    """target's header and tokens with donor's KV bytes; the counts and any CRC made to fit, the rest kept."""
    prefix, header, tokens, _, rest = _raw_parts(target)
    body = _raw_parts(donor)[3]
    header["state_bytes"] = len(body)
    if "checksum" in header:
        header["checksum"] = zlib.crc32(body, zlib.crc32(tokens))
    target.write_bytes(_with_header(prefix, header, tokens + body + rest))


TAMPERINGS = [
    Tampering("a FIFO beside the state", make_fifo, good_kept=True),
    Tampering("a header nested 400,000 deep", make_nested, good_kept=True),
    Tampering("a 1 MiB header", make_huge_header, good_kept=True),
    Tampering("the state cut in half", make_truncated, good_kept=False),
    Tampering("a link to a valid state elsewhere", make_link, good_kept=False),
    Tampering("another chat's KV bytes, CRC recomputed", make_swapped, good_kept=False, needs_other_chat=True),
]
DONOR = "other chat.kvstate"


def _ask(home: Path, tiny: Path, prompt: str) -> Finished:
    return run(chat(tiny, "--max-tokens", "8", "--temperature", "0", "--seed", "1", "--json", message=prompt),
               env=app_env(home), timeout=HANG_AFTER_S)


def _answer_of(done: Finished) -> tuple[str, dict]:
    text, stats = "", {}
    for line in done.stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("type") == "delta":
            text += event.get("text", "")
        elif event.get("type") == "done":
            stats = event
    return text, stats


def _check_run(case: Case, done: Finished, who: str) -> tuple[str, dict]:
    check_finished(case, done, {0}, limit_s=LIMIT_S, limit_mb=None)
    unplain = UNPLAIN.search(done.stderr)
    case.check(unplain is None, f"{who}: not plain words: {_short(done.stderr)}")
    text, stats = _answer_of(done)
    case.check(bool(stats), f"{who}: no answer: {_short(done.stdout + done.stderr)}")
    return text, stats


@dataclass(frozen=True)
class FirstRun:
    """A home whose one chat has been answered once (its state saved), copied for each case."""

    home: Path
    text: str
    stats: dict
    finished: Finished


def first_run(ctx: Context) -> FirstRun:
    home = ctx.home("states first run")
    finished = _ask(home, ctx.tiny, PROMPT)
    text, stats = _answer_of(finished)
    return FirstRun(home, text, stats, finished)


def tampered_case(ctx: Context, tampering: Tampering, first: FirstRun) -> Case:
    case = Case(CATEGORY, tampering.name)
    if os.name == "nt" and tampering.make in (make_fifo, make_link):
        case.detail["skipped"] = "FIFOs and links as a user makes them on POSIX"
        return case
    _check_run(case, first.finished, "the first run")
    if not case.passed:
        return case
    home = ctx.folder(f"states {tampering.name}") / first.home.name
    shutil.copytree(first.home, home, symlinks=True)
    folder = _states(home)
    if tampering.needs_other_chat:  # this chat's state goes aside while the other chat is asked
        good = _good(folder)
        aside = home.parent / "this chat.kvstate"
        shutil.move(good, aside)
        _check_run(case, _ask(home, ctx.tiny, OTHER_PROMPT), "the other chat")
        shutil.move(_good(folder), home.parent / DONOR)
        shutil.move(aside, good)
    bad = tampering.make(folder, home.parent)
    target = bad.resolve() if bad.is_symlink() else None
    target_bytes = target.read_bytes() if target is not None else b""
    tampered = _contents(bad)
    second_text, second = _check_run(case, _ask(home, ctx.tiny, PROMPT), "the second run")
    case.detail.update(first=first.stats, second=second)
    if not second:
        return case
    case.check(second_text == first.text, f"another answer: {second_text!r} after {first.text!r}")
    prompt, evaluated = second.get("prompt_tokens", 0), second.get("prompt_tokens_evaluated", -1)
    if tampering.good_kept:
        case.check(evaluated < prompt, f"the good state was not used ({evaluated} of {prompt} tokens evaluated)")
    else:
        case.check(evaluated == prompt, f"a bad state was used ({evaluated} of {prompt} tokens evaluated)")
    # Gone, or a regular file the second run wrote under the same name (the same tokens).
    left = _contents(bad) if os.path.lexists(bad) else None
    case.check(left is None or (stat.S_ISREG(bad.lstat().st_mode) and left != tampered),
               f"the bad entry is still there: {bad.name}")
    if target is not None:
        case.check(target.exists() and target.read_bytes() == target_bytes, "what the link pointed to was changed")
    return case


def _contents(path: Path) -> bytes:
    """A regular file's bytes; for anything else a marker of its kind (never opened: a FIFO would block)."""
    mode = path.lstat().st_mode
    return path.read_bytes() if stat.S_ISREG(mode) else f"mode {stat.S_IFMT(mode):o}".encode()


def cat_tampered_states(ctx: Context) -> list[Case]:
    # The sample leaves out the case of three runs.
    tamperings = [t for t in TAMPERINGS if not t.needs_other_chat] if ctx.sample else TAMPERINGS
    first = first_run(ctx)
    return [tampered_case(ctx, tampering, first) for tampering in ctx.pick(tamperings, 2, CATEGORY)]


DESCRIPTION = ("a FIFO, nested or huge headers, a cut file, a swapped KV body, a link in the saved states: "
               "chat twice exits 0 in plain words, the right answer, the bad entry removed")
