"""What goes wrong with the history file: the user's machine (HistoryError) or a damaged file (HistoryDamaged)."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from app.core.store.history_schema import DAMAGED, is_damage


class HistoryError(Exception):
    """The history cannot be read or written because of the user's machine.

    The message is meant for the user: it says what went wrong and what to do.
    """


class HistoryDamaged(HistoryError):
    """The history file is damaged, or is not a database: SQLite cannot read all of it.

    `path` is the file; `detail` what SQLite found, in its own words. Kestrel never
    changes such a file by itself: the user chooses (app/core/store/history_repair.py).
    """

    def __init__(self, message: str, path: Path, detail: str) -> None:
        super().__init__(message)
        self.path = path
        self.detail = detail


def check_damage(path: Path) -> None:
    """HistoryDamaged if the history file at `path` is damaged or is not a database.

    Runs SQLite's quick_check over a read-only connection, so a damaged file (and its
    WAL) is read and never written. A file that is missing, busy or unreadable is not
    called damaged here: the ordinary open says what is wrong with it.

    The cost is reading the file once: on a 280 MB history of 100,000 messages, 180 ms
    with the file in the OS cache and 1.5 s from a cold disk (the ordinary open takes
    190 ms); on 2,000 messages (6 MB), 4 ms cached and 40 ms cold.
    """
    if not path.is_file():
        return
    # An empty file passes (quick_check says ok): it is how SQLite itself starts a new
    # database, has no chats in it to lose, and opens as a new, empty history.
    companions = [Path(f"{path}{suffix}") for suffix in ("-wal", "-shm")]
    created = [companion for companion in companions if not companion.exists()]
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return
    cause: sqlite3.Error | None = None
    try:
        # quick_check reads every page and checks the structure of every table and
        # index; unlike integrity_check it does not match each index against its
        # table, which keeps it near the cost of reading the file once.
        rows = [tuple(row) for row in conn.execute("PRAGMA quick_check").fetchall()]
        damage = None if rows == [("ok",)] else _first_findings(rows)
    except sqlite3.DatabaseError as error:
        damage, cause = (str(error), error) if is_damage(error) else (None, None)
    finally:
        conn.close()
    if damage is not None:
        # A read-only look at a WAL database makes an empty WAL and its index: gone
        # again, so that the damaged file is found as it was left.
        for companion in created:
            with contextlib.suppress(OSError):
                if companion.name.endswith("-shm") or companion.stat().st_size == 0:
                    companion.unlink()
        raise damaged(path, damage) from cause


def _first_findings(rows: list[tuple[object, ...]]) -> str:
    """quick_check's report, cut to its first two findings (it may list thousands)."""
    lines = [line for row in rows for line in str(row[0]).splitlines()
             if line.strip() and not line.startswith("*** in database")]
    shown = "; ".join(lines[:2])
    return shown + (f"; and {len(lines) - 2} more" if len(lines) > 2 else "")


def damaged(path: Path, detail: str) -> HistoryDamaged:
    """The HistoryDamaged for the file at `path`, with the message the user reads."""
    return HistoryDamaged(DAMAGED.format(path=path), path, detail)

