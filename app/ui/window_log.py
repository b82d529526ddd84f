"""The window's log: its process writes Kestrel's log, hears the service through one EventLog, and adds what
only the window knows (the API server's state, quick ask's shortcut); Help → Open logs shows the folder."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices

from app.core.app_log import keep_log, without_private
from app.core.paths import DataPaths
from app.service.event_log import EventLog

log = logging.getLogger(__name__)


class WindowLog(EventLog):
    """Keeps the log in `paths.logs`; `heard` goes to the service's subscribe. The server's and the
    shortcut's words are logged when they change, not each time they are said again."""

    def __init__(self, paths: DataPaths) -> None:
        super().__init__()
        self.folder = paths.logs
        self.file: Path | None = None
        try:
            self.file = keep_log(paths.logs)
        except OSError as exc:  # a read-only or full disk: Kestrel runs on, without its log
            self.problem = f"Kestrel could not write its log in {paths.logs} ({exc.strerror or exc})."
        else:
            self.problem = ""
        self._server = ""
        self._shortcut = ""

    def server_changed(self, words: str) -> None:
        """The status line's words for the API server ("" while it is off)."""
        if words != self._server:
            log.info("API server: %s", words or "off")
            self._server = words

    def shortcut_changed(self, held: bool, words: str) -> None:
        said = f"{'held' if held else 'not held'}: {without_private(words)}"
        if said != self._shortcut:
            (log.info if held else log.warning)("quick ask's shortcut %s", said)
            self._shortcut = said

    def open_folder(self, open_url: Callable[[QUrl], bool] = QDesktopServices.openUrl) -> bool:
        """Show the log folder in the file manager, as About opens its folders; False when it could not."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            return False
        return open_url(QUrl.fromLocalFile(str(self.folder)))
