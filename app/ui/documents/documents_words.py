"""The Documents window's words: a collection's state, when it was indexed, how far indexing is and why it waits."""

from __future__ import annotations

import time
from datetime import datetime

from app.documents.readers import formats_in_words
from app.service.events import CollectionInfo, IndexingProgress, IndexState

# By the state's value, not its member: the words follow what the service says it is doing.
_STATE_WORDS = {
    "idle": "Up to date",
    "waiting": "Waiting",
    "scanning": "Looking for changes",
    "reading": "Reading files",
    "embedding": "Preparing search by meaning",
    "paused": "Paused",
    "failed": "Stopped by a problem",
}
# The states in which files are being read or vectors made: the progress bar is shown.
BUSY_STATES = frozenset({"waiting", "scanning", "reading", "embedding", "paused"})
NO_MODEL = "Search by meaning: off — add an embedding model in the models window"
NONE_CHOSEN = "Search by meaning: off — choose an embedding model"
EMPTY = "Add a folder to search your files from chats"
def empty_detail() -> str:
    """Under "Add a folder…" while there is no collection: what Kestrel reads (from the readers' registry)."""
    return (f"Kestrel reads the documents in it ({formats_in_words()}) and keeps an index here on this computer; "
            "your files stay where they are.")


def state_words(info: CollectionInfo) -> str:
    """The collection's state as its row shows it ("Up to date" only once it has been indexed)."""
    value = _value(info.state)
    if value == "idle" and info.last_indexed is None:
        return "Not indexed yet"
    return _STATE_WORDS.get(value, value.capitalize())


def files_words(info: CollectionInfo) -> str:
    """"860" or "860 (3 unreadable)": the files column."""
    return f"{info.files} ({info.unreadable} unreadable)" if info.unreadable else str(info.files)


def ago(when: float | None, now: float | None = None) -> str:
    """When a collection was last indexed, the way people say it: "just now", "2 minutes ago"…"""
    if when is None:
        return "Never"
    seconds = max(0.0, (time.time() if now is None else now) - when)
    if seconds < 60:
        return "Just now"
    minutes = int(seconds // 60)
    if minutes < 60:
        return "1 minute ago" if minutes == 1 else f"{minutes} minutes ago"
    hours = minutes // 60
    if hours < 24:
        return "1 hour ago" if hours == 1 else f"{hours} hours ago"
    days = hours // 24
    if days == 1:
        return "Yesterday"
    if days < 7:
        return f"{days} days ago"
    return datetime.fromtimestamp(when).strftime("%d %b %Y").lstrip("0")


def time_left(seconds: float | None) -> str:
    """"about 2 min left"; "" while the service cannot tell yet."""
    if seconds is None or seconds < 0:
        return ""
    if seconds < 60:
        return "less than a minute left"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"about {minutes} min left"
    hours, minutes = divmod(minutes, 60)
    return f"about {hours} h {minutes} min left" if minutes else f"about {hours} h left"


def progress_words(progress: IndexingProgress) -> str:
    """The line under the progress bar: why it waits, or "120 of 860 files · about 2 min left"."""
    value = _value(progress.state)
    if progress.waiting_because:
        reason = progress.waiting_because
    elif value == "paused":
        reason = "Paused"
    elif value == "waiting":
        reason = "Waiting"
    else:
        reason = ""
    if value == "embedding":
        counted = f"{progress.done} of {progress.total} passages prepared for search by meaning"
    elif value == "scanning":
        counted = "Looking for new, changed and deleted files"
    else:
        counted = f"{progress.done} of {progress.total} files"
    left = "" if reason else time_left(progress.seconds_left)
    parts = [part for part in (reason, counted if progress.total or value == "scanning" else "", left) if part]
    return f"{progress.collection}: " + " · ".join(parts)


def is_busy(state: IndexState) -> bool:
    """Whether the collection is being indexed (or waits to go on): its progress is worth showing."""
    return _value(state) in BUSY_STATES


def is_going(state: IndexState) -> bool:
    """Indexed or being read: whatever stopped the collection before has passed."""
    return _value(state) in ("idle", "reading", "embedding")


def is_paused(state: IndexState) -> bool:
    return _value(state) == "paused"


def _value(state: IndexState) -> str:
    return str(state.value)
