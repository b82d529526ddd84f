"""Real history files damaged as the red-team pass damaged them: random bytes over one page."""

from __future__ import annotations

import hashlib
import random
import sqlite3
from pathlib import Path

from app.core.conversation import Role
from app.core.store.history import HistoryStore

CONVERSATIONS = 20
MESSAGES_EACH = 10


def write_history(path: Path) -> None:
    """A closed history with 20 conversations of 10 messages each (about 50 pages).

    Page 2 is then the root (and only page) of the conversations table, page 4 the
    root of the messages table, page 5 the root of the messages-by-conversation index.
    """
    with HistoryStore(path) as store:
        for number in range(CONVERSATIONS):
            conversation = store.create_conversation(f"chat {number}")
            for turn in range(MESSAGES_EACH):
                role = Role.USER if turn % 2 == 0 else Role.ASSISTANT
                store.add_message(conversation.id, role, f"message {turn} of chat {number} " + "x" * 300)


def page_size(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()


def damage_page(path: Path, page: int, seed: int = 0) -> None:
    """Write random bytes over one whole page (pages count from 1), as a bad disk would."""
    size = page_size(path)
    noise = random.Random(seed * 1000 + page).randbytes(size)
    with open(path, "r+b") as file:
        file.seek((page - 1) * size)
        file.write(noise)


def damage_in_use(path: Path, page: int) -> None:
    """Damage a page of a history another connection has open, as a failing disk would.

    An open connection keeps the pages it read in its cache while the WAL says nothing
    changed: another connection commits once, so the next read comes from the disk.
    """
    damage_page(path, page)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        version = other.execute("PRAGMA user_version").fetchone()[0]
        other.execute(f"PRAGMA user_version = {version:d}")
    finally:
        other.close()


def damaged_history(path: Path, page: int) -> Path:
    """A history with some conversations and random bytes over `page`."""
    write_history(path)
    damage_page(path, page)
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
