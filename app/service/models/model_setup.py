"""The starter model and imports: slow file work on a worker thread, with progress and cancel."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Callable

from app.library.model_files.gguf_info import ModelFileError
from app.library.importer import ImportCancelled, ImportFailed, import_model_file, import_model_folder
from app.library.installed import InstalledModel
from app.library.models import ModelLibrary
from app.library.starter import StarterError, install_starter, starter_available
from app.service.events import Event, SetupFinished, SetupProgress

Work = Callable[[Callable[[int, int], None]], InstalledModel]


class ModelSetup:
    """Runs one file job at a time off the event loop; progress goes out as events.

    `last_problem` says why the last job gave no model (refused, failed or cancelled).
    """

    def __init__(self, library: ModelLibrary, emit: Callable[[Event], None]) -> None:
        self.library = library
        self._emit = emit
        self.last_problem: str | None = None
        self.running = False
        self._cancel = threading.Event()

    def starter_available(self) -> bool:
        return starter_available()

    def cancel(self) -> None:
        self._cancel.set()

    async def install_starter(self) -> InstalledModel | None:
        """Assemble the starter model (checksum verified); None if cancelled or failed."""
        loop = asyncio.get_running_loop()

        def waiting() -> None:  # another Kestrel is assembling it; this one waits its turn
            loop.call_soon_threadsafe(self._emit, SetupProgress(
                "Waiting for another Kestrel to finish setting up the starter model", 0, 0))

        return await self._run("Setting up the starter model",
                               lambda report: install_starter(self.library, report, self._cancel.is_set, waiting))

    async def import_model(self, path: str) -> InstalledModel | None:
        """Check and copy a GGUF file or an ONNX folder into the library.

        None, with last_problem saying why, if it is refused or cancelled.
        """
        source = Path(path)
        importer = import_model_folder if source.is_dir() else import_model_file
        return await self._run(f"Importing {source.name}",
                               lambda report: importer(self.library, source, report, self._cancel.is_set))

    async def _run(self, what: str, work: Work) -> InstalledModel | None:
        loop = asyncio.get_running_loop()
        self._cancel.clear()
        self.last_problem = None
        self.running = True

        def report(done: int, total: int) -> None:
            loop.call_soon_threadsafe(self._emit, SetupProgress(what, done, total))

        try:
            return await loop.run_in_executor(None, work, report)
        except (StarterError, ModelFileError, ImportCancelled, ImportFailed) as exc:
            self.last_problem = str(exc)
            return None
        finally:
            self.running = False
            # After the progress calls already posted from the worker thread.
            loop.call_soon(self._emit, SetupFinished())
