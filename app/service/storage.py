"""The history and the settings file behind one writer thread, with an async API.

SQLite calls and every fsync run on that thread, so the event loop (the UI thread in the
window) never waits on the disk. One thread, not a pool: the history connection is used
from one thread only, and writes keep the order they were asked in.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Concatenate, ParamSpec, TypeVar

from app.core.store.history import HistoryDamaged, HistoryError, HistoryStore
from app.core.store.history_repair import Replacement, replace_damaged
from app.core.settings import Settings, SettingsFile
from app.service.history_watch import HistoryWatch

P = ParamSpec("P")
T = TypeVar("T")

# SQLite's name for a database that lives in memory only (the headless `chat` command).
IN_MEMORY = Path(":memory:")


class Storage:
    """Owns the HistoryStore and the SettingsFile; every call runs on the writer thread.

    `settings` is the last saved (or loaded) value; `settings_problem` what went wrong
    reading the file at start-up, for the user.

    `history_damage` is set when the history file is found damaged (at start-up, or by
    any later call, which still raises; `on_damaged` hears of it then). A file found
    damaged at start-up is left as it is and the history lives in memory until
    `replace_damaged_history()`, which the user chooses.
    """

    def __init__(self, executor: ThreadPoolExecutor, store: HistoryStore,
                 settings_file: SettingsFile | None, settings: Settings, *,
                 history_path: Path | None = None, history_damage: HistoryDamaged | None = None) -> None:
        self._executor = executor
        self._store = store
        self._history_path = history_path if history_path is not None else store.path
        self.history_damage = history_damage
        self.on_damaged: Callable[[HistoryDamaged], None] | None = None
        self._settings_file = settings_file
        self.settings = settings
        self.settings_problem = settings_file.last_problem if settings_file else None
        self._closed = False
        self._watch: HistoryWatch | None = None
        self._writer_version: int | None = None

    @classmethod
    async def open(cls, history_path: Path, settings_path: Path | None) -> Storage:
        """Open (and migrate) the history and read the settings, off the event loop.

        settings_path None: settings live in memory only and are never written.
        A damaged history file is not opened: the history is kept in memory and
        `history_damage` says why. HistoryError if the history cannot be used for
        another reason (the message is for the user).
        """
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kestrel-writer")
        loop = asyncio.get_running_loop()

        def open_both() -> tuple[HistoryStore, HistoryDamaged | None, SettingsFile | None, Settings]:
            damage = None
            try:
                store = HistoryStore(history_path)
            except HistoryDamaged as exc:
                damage, store = exc, HistoryStore(IN_MEMORY)
            settings_file = SettingsFile(settings_path) if settings_path is not None else None
            return store, damage, settings_file, settings_file.load() if settings_file else Settings()

        try:
            store, damage, settings_file, settings = await loop.run_in_executor(executor, open_both)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(executor, store, settings_file, settings, history_path=history_path, history_damage=damage)

    async def history(self, method: Callable[Concatenate[HistoryStore, P], T],
                      *args: P.args, **kwargs: P.kwargs) -> T:
        """Run one HistoryStore method on the writer thread: `await storage.history(
        HistoryStore.messages, conversation_id)`. HistoryError for the user's disk."""
        call = functools.partial(method, self._store, *args, **kwargs)
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, call)
        except HistoryDamaged as exc:
            if self.history_damage is None:
                self.history_damage = exc
                if self.on_damaged is not None:
                    self.on_damaged(exc)
            raise

    @property
    def in_memory(self) -> bool:
        """True while the history lives in memory only (the CLI; a damaged file set aside)."""
        return self._store.path == IN_MEMORY

    async def replace_damaged_history(self, recover: bool) -> Replacement:
        """The user's choice for a damaged history: a new one takes its place.

        The damaged file is renamed, unchanged, next to it (Replacement.aside). recover:
        what SQLite can still read of it goes into the new one. Chats written in memory
        meanwhile move into it too. HistoryError if the disk refuses; nothing changed then.
        """
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._replace_damaged, recover)

    def _replace_damaged(self, recover: bool) -> Replacement:
        old = self._store
        carry = old if self.in_memory else None
        if carry is None:
            old.close()  # found damaged while in use: it is the file to set aside
        try:
            replacement = replace_damaged(self._history_path, recover=recover, carry=carry)
            self._store = HistoryStore(self._history_path)
        except BaseException:
            if carry is None:
                self._store = self._reopen_or_memory()
            raise
        if carry is not None:
            carry.close()
        self.history_damage = None
        self._writer_version = None  # a new connection: its versions start afresh
        return replacement

    def _reopen_or_memory(self) -> HistoryStore:
        try:
            return HistoryStore(self._history_path)
        except HistoryError:
            return HistoryStore(IN_MEMORY)

    async def save_settings(self, settings: Settings) -> bool:
        """Write the settings if they changed; True if written. SettingsError if refused."""
        if settings == self.settings:
            return False
        if self._settings_file is not None:
            await asyncio.get_running_loop().run_in_executor(self._executor, self._settings_file.save, settings)
        # Only after a successful write, so that a refused one is tried again next time.
        self.settings = settings
        return self._settings_file is not None

    async def run(self, work: Callable[[], T]) -> T:
        """Other file work (small JSON files beside the settings) on the writer thread."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, work)

    async def watch(self, changed: Callable[[], None]) -> None:
        """Call changed() (on the watch's thread) whenever another process commits to the
        history file; never for this storage's own writes. Not for a history in memory."""
        if self.in_memory or self._watch is not None or self._closed:
            return
        await self.run(self._foreign_commit)  # the writer's starting point
        self._watch = HistoryWatch(self._foreign_from_watch, changed)
        self._watch.start()

    def _foreign_from_watch(self) -> bool:
        """Asked by the watch's thread: did another process commit since the last look?"""
        try:
            return self._executor.submit(self._foreign_commit).result()
        except (RuntimeError, HistoryError, sqlite3.Error):  # closing (no new work), or the disk failed
            return False

    def _foreign_commit(self) -> bool:
        """On the writer thread: the writer's own data_version moved since it was last read."""
        version = self._store.data_version() if not self.in_memory else None
        moved = version != self._writer_version and self._writer_version is not None
        self._writer_version = version
        return moved

    async def close(self) -> None:
        """Stop watching, finish pending writes, then close the database."""
        if self._closed:
            return
        self._closed = True
        if self._watch is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._watch.stop)
        await asyncio.get_running_loop().run_in_executor(self._executor, self._store.close)
        self._executor.shutdown(wait=True)
