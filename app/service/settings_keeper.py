"""The app's settings as the service holds them: the value in use, and saving it."""

from __future__ import annotations

from collections.abc import Callable

from app.core.settings import Settings, SettingsError
from app.service.events import Event, Problem
from app.service.storage import Storage


class SettingsKeeper:
    """Holds `settings` and writes every change through the storage's writer thread.

    A file that cannot be written is said (a Problem), not raised: the value still
    changes for this run. What a change means for the loaded model is the model
    session's business (ModelSession.settings_changed), not the keeper's.
    """

    def __init__(self, storage: Callable[[], Storage], emit: Callable[[Event], None],
                 settings: Settings | None = None) -> None:
        self._storage = storage
        self._emit = emit
        self._given = settings is not None
        self.settings = settings or Settings()

    def adopt(self, storage: Storage) -> None:
        """The history was opened: its settings file's value is the one in use (unless
        the front end gave its own, as `chat` does)."""
        if not self._given:
            self.settings = storage.settings

    async def save(self, settings: Settings) -> None:
        """Keep these settings; a file that cannot be written is said (Problem), not raised."""
        try:
            await self._storage().save_settings(settings)
        except SettingsError as exc:
            self._emit(Problem(str(exc), "disk"))
        self.settings = settings
