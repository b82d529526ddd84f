"""The history's SQLite file: opened, checked, migrated to the current format, and its transactions."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Self

from app.core.store.history_errors import HistoryError, check_damage, damaged
from app.core.store.history_rows import fold_or_null, fold_stored_message
from app.core.store.history_schema import MIGRATIONS, environment_problem, is_damage


class HistoryFile:
    """The connection to the history's SQLite file, set up and at the current format.

    HistoryStore builds its conversations and messages on it; this part knows nothing of
    them but the search copy, which a start refreshes for rows another program added.
    """

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], float] = time.time,
        busy_timeout: float = 5.0,
        check_same_thread: bool = True,
    ) -> None:
        self.path = Path(path)
        self._clock = clock
        self._depth = 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise HistoryError(
                f"Kestrel cannot create the folder {self.path.parent} for its chat "
                f"history ({error.strerror}). Check its permissions, then restart Kestrel."
            ) from error
        if str(self.path) != ":memory:":
            # Before anything writes: a damaged file is reported as it was found.
            check_damage(self.path)
        with self._translate_errors():
            # isolation_level=None: transactions are opened only by transaction().
            self._conn = sqlite3.connect(
                self.path,
                timeout=busy_timeout,
                isolation_level=None,
                check_same_thread=check_same_thread,
            )
        try:
            with self._translate_errors():
                self._configure()
                self._migrate()
                self._fold_missing()
        except BaseException:
            self._conn.close()
            raise

    def _configure(self) -> None:
        self._conn.row_factory = sqlite3.Row
        self._conn.create_function("kestrel_fold", 1, fold_or_null, deterministic=True)
        self._conn.create_function("kestrel_fold_message", 3, fold_stored_message, deterministic=True)
        self._conn.execute("PRAGMA journal_mode = WAL")
        # In WAL mode FULL costs one fsync per commit: about one a second while an
        # answer streams. It keeps a committed message through a power cut, where
        # NORMAL would keep it only through a crash of Kestrel itself.
        self._conn.execute("PRAGMA synchronous = FULL")
        self._conn.execute("PRAGMA foreign_keys = ON")
        # Deleted rows are overwritten, not left in free pages: a forgotten memory or a deleted
        # chat leaves no readable copy in the file (the log is emptied after a forget: empty_log).
        self._conn.execute("PRAGMA secure_delete = ON")

    def _migrate(self) -> None:
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            raise HistoryError(
                f"The chat history at {self.path} was written by a newer version of "
                f"Kestrel (history format {version}; this version reads up to "
                f"{len(MIGRATIONS)}). Update Kestrel to open it."
            )
        for target, migration in enumerate(MIGRATIONS[version:], start=version + 1):
            with self.transaction() as conn:
                migration(conn)
                # PRAGMA takes no parameters; target is an int we computed.
                conn.execute(f"PRAGMA user_version = {target:d}")

    def _fold_missing(self) -> None:
        # Messages another program added without the folded copy (see _migrate_to_v2)
        # become searchable now. The read goes first so an ordinary start, and a
        # read-only file, need no write lock.
        missing = self._conn.execute(
            "SELECT 1 FROM messages WHERE folded IS NULL LIMIT 1"
        ).fetchone()
        if missing is not None:
            with self.transaction() as conn:
                conn.execute(
                    "UPDATE messages SET folded = kestrel_fold_message(text, parts, attachments)"
                    " WHERE folded IS NULL"
                )

    @contextmanager
    def _translate_errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as error:
            if is_damage(error):
                raise damaged(self.path, str(error)) from error
            problem = environment_problem(error, self.path)
            if problem is None:
                raise
            raise HistoryError(problem) from error

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Run the block in one transaction: commit at the end, roll back on error.

        A transaction opened inside another joins it. Errors from the user's machine
        come out as HistoryError.
        """
        with self._translate_errors():
            if self._depth == 0:
                # IMMEDIATE takes the write lock now, so a busy database fails here
                # rather than half-way through the block.
                self._conn.execute("BEGIN IMMEDIATE")
            self._depth += 1
            try:
                yield self._conn
                if self._depth == 1:
                    self._conn.commit()
            except BaseException:
                # A failed COMMIT (disk full) leaves the transaction open: end it too.
                if self._depth == 1 and self._conn.in_transaction:
                    self._conn.rollback()
                raise
            finally:
                self._depth -= 1

    def empty_log(self) -> None:
        """Copy the write-ahead log into the file and empty it, so the log keeps no copy of pages
        written before (a forgotten memory's). Outside a transaction only; a reader elsewhere (another
        Kestrel) may hold part of it back until its own next checkpoint."""
        with self._translate_errors():
            if str(self.path) != ":memory:":
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def close(self) -> None:
        """Close the database; the store cannot be used afterwards."""
        self._conn.close()

    def data_version(self) -> int:
        """SQLite's data_version on this connection: it moves only when another connection
        (another Kestrel) committed, never for this store's own writes."""
        with self._translate_errors():
            # fetchall: a statement left unfinished would keep its snapshot (and its version).
            return int(self._conn.execute("PRAGMA data_version").fetchall()[0][0])

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
