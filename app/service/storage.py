"""The history and the settings file behind one writer thread, with an async API.

SQLite calls and every fsync run on that thread, so the event loop (the UI thread in the
window) never waits on the disk. One thread, not a pool: the history connection is used
from one thread only, and writes keep the order they were asked in.
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Concatenate, ParamSpec, TypeVar

from app.core.history import HistoryStore
from app.core.settings import Settings, SettingsFile

P = ParamSpec("P")
T = TypeVar("T")

# SQLite's name for a database that lives in memory only (the headless `chat` command).
IN_MEMORY = Path(":memory:")


class Storage:
    """Owns the HistoryStore and the SettingsFile; every call runs on the writer thread.

    `settings` is the last saved (or loaded) value; `settings_problem` what went wrong
    reading the file at start-up, for the user.
    """

    def __init__(self, executor: ThreadPoolExecutor, store: HistoryStore,
                 settings_file: SettingsFile | None, settings: Settings) -> None:
        self._executor = executor
        self._store = store
        self._settings_file = settings_file
        self.settings = settings
        self.settings_problem = settings_file.last_problem if settings_file else None
        self._closed = False

    @classmethod
    async def open(cls, history_path: Path, settings_path: Path | None) -> Storage:
        """Open (and migrate) the history and read the settings, off the event loop.

        settings_path None: settings live in memory only and are never written.
        HistoryError if the history cannot be used (the message is for the user).
        """
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kestrel-writer")
        loop = asyncio.get_running_loop()

        def open_both() -> tuple[HistoryStore, SettingsFile | None, Settings]:
            store = HistoryStore(history_path)
            settings_file = SettingsFile(settings_path) if settings_path is not None else None
            return store, settings_file, settings_file.load() if settings_file else Settings()

        try:
            store, settings_file, settings = await loop.run_in_executor(executor, open_both)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(executor, store, settings_file, settings)

    async def history(self, method: Callable[Concatenate[HistoryStore, P], T],
                      *args: P.args, **kwargs: P.kwargs) -> T:
        """Run one HistoryStore method on the writer thread: `await storage.history(
        HistoryStore.messages, conversation_id)`. HistoryError for the user's disk."""
        call = functools.partial(method, self._store, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    async def save_settings(self, settings: Settings) -> bool:
        """Write the settings if they changed; True if written. SettingsError if refused."""
        if settings == self.settings:
            return False
        if self._settings_file is not None:
            await asyncio.get_running_loop().run_in_executor(self._executor, self._settings_file.save, settings)
        # Only after a successful write, so that a refused one is tried again next time.
        self.settings = settings
        return self._settings_file is not None

    async def close(self) -> None:
        """Finish pending writes, then close the database."""
        if self._closed:
            return
        self._closed = True
        await asyncio.get_running_loop().run_in_executor(self._executor, self._store.close)
        self._executor.shutdown(wait=True)
