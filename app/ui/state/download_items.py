"""Downloads as the user reads them: each state's words, the downloads' item model, progress, time left, a card's lines."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt

from app.core.units import human_size
from app.service.events import DownloadItem, DownloadState
from app.ui.state.model_items import ROW_ROLES, Roles, RowTableModel

# The words for each state; tests/ui/test_model_items.py checks every DownloadState has them.
DOWNLOAD_STATE_WORDS: dict[DownloadState, str] = {
    DownloadState.QUEUED: "Waiting", DownloadState.RUNNING: "Downloading", DownloadState.PAUSED: "Paused",
    DownloadState.VERIFYING: "Checking", DownloadState.DONE: "Done", DownloadState.FAILED: "Failed",
    DownloadState.CANCELLED: "Cancelled"}
# Download states in which each button does something.
PAUSABLE: frozenset[DownloadState] = frozenset({DownloadState.QUEUED, DownloadState.RUNNING})
RESUMABLE: frozenset[DownloadState] = frozenset({DownloadState.PAUSED, DownloadState.FAILED})
CANCELLABLE: frozenset[DownloadState] = frozenset({DownloadState.QUEUED, DownloadState.RUNNING, DownloadState.PAUSED,
                                                   DownloadState.VERIFYING, DownloadState.FAILED})
# States whose card shows a progress bar: a finished, failed or cancelled download's bar
# would only say how far it got, and the status line says that already.
WITH_BAR: frozenset[DownloadState] = frozenset({DownloadState.QUEUED, DownloadState.RUNNING, DownloadState.PAUSED,
                                                DownloadState.VERIFYING})
# States whose service message is the status itself ("Paused.", "Cancelled; what had
# arrived was deleted."): shown instead of the state's words, never under them as well.
_MESSAGE_IS_STATUS: frozenset[DownloadState] = frozenset({DownloadState.PAUSED, DownloadState.CANCELLED})


class DownloadsModel(RowTableModel):
    """Downloads (app.service.events.DownloadItem), in the order they started."""

    COLUMNS = ("Model", "Progress", "Speed", "Time left", "State", "Message")
    MODEL, PROGRESS, SPEED, LEFT, STATE, MESSAGE = range(6)

    def key(self, row: Any) -> object:
        return row.id

    def cell(self, row: Any, column: int, role: int) -> Any:
        if role == Roles.SORT:
            return row.done if column == self.PROGRESS else self._text(row, column).lower()
        if role in ROW_ROLES:
            return {Roles.ID: row.id, Roles.ROW: row, Roles.STATE: row.state, Roles.FRACTION: fraction(row),
                    Roles.SEARCH: row.title.lower()}.get(Roles(role))
        if role == Qt.ItemDataRole.ToolTipRole and column == self.MESSAGE:
            return row.message or None
        return self._text(row, column) if role == Qt.ItemDataRole.DisplayRole else None

    def _text(self, row: DownloadItem, column: int) -> str:
        running = row.state == DownloadState.RUNNING
        if column == self.MODEL:
            return row.title
        if column == self.PROGRESS:
            return progress_text(row.done, row.total)
        if column == self.SPEED:
            return f"{human_size(int(row.bytes_per_second))}/s" if running and row.bytes_per_second else ""
        if column == self.LEFT:
            return duration_text(row.seconds_left) if running and row.seconds_left is not None else ""
        if column == self.STATE:
            return DOWNLOAD_STATE_WORDS[row.state]
        return row.message or ""


def fraction(item: DownloadItem) -> float:
    """How much of a download is in; -1.0 while one of unknown size is moving (a busy bar)."""
    if not item.total:
        if item.state == DownloadState.DONE:
            return 1.0
        return -1.0 if item.state in (DownloadState.RUNNING, DownloadState.VERIFYING) else 0.0
    return min(1.0, item.done / item.total)


def progress_text(done: int, total: int | None) -> str:
    if not total:
        return human_size(done) if done else ""
    return f"{done * 100 // total}% · {human_size(done)} of {human_size(total)}"


def duration_text(seconds: float) -> str:
    """Time left as a person says it: "40 s", "3 min 20 s", "1 h 5 min"."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def status_line(item: DownloadItem) -> str:
    """A download card's one status line: the state (or the service's words for it), how far, how fast, how long."""
    if item.state in _MESSAGE_IS_STATUS and item.message:
        words = item.message.rstrip(".")
    else:
        words = DOWNLOAD_STATE_WORDS[item.state]
    if item.state == DownloadState.CANCELLED:
        return words
    parts = [words, progress_text(item.done, item.total)]
    if item.state == DownloadState.RUNNING:
        if item.bytes_per_second:
            parts.append(f"{human_size(int(item.bytes_per_second))}/s")
        if item.seconds_left is not None:
            parts.append(f"{duration_text(item.seconds_left)} left")
    return " · ".join(part for part in parts if part)


def message_line(item: DownloadItem) -> str:
    """What the service said that the status line does not (why it failed, what it is doing); "" for nothing."""
    return "" if item.state in _MESSAGE_IS_STATUS else item.message
