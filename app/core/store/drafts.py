"""Unsent drafts in the history database: one text per chat, and one for the new chat."""

from __future__ import annotations

import time
from collections.abc import Mapping

from app.core.store.history import HistoryStore

# The new chat has no id until its first message is sent; its draft is kept as chat 0,
# an id SQLite's AUTOINCREMENT never hands out.
NEW_CHAT = 0


def read_drafts(store: HistoryStore) -> dict[int | None, str]:
    """Every saved draft, by chat id (None: the new chat)."""
    with store.transaction() as conn:
        rows = conn.execute("SELECT chat, text FROM drafts").fetchall()
    return {(None if row[0] == NEW_CHAT else int(row[0])): str(row[1]) for row in rows}


def write_drafts(store: HistoryStore, drafts: Mapping[int | None, str]) -> None:
    """Keep these drafts in one transaction; an empty text forgets the chat's draft.

    A draft for a chat deleted meanwhile is not kept (the chat is gone).
    """
    now = time.time()
    with store.transaction() as conn:
        for chat, text in drafts.items():
            key = NEW_CHAT if chat is None else chat
            if not text:
                conn.execute("DELETE FROM drafts WHERE chat = ?", (key,))
            elif key == NEW_CHAT or conn.execute(
                    "SELECT 1 FROM conversations WHERE id = ?", (key,)).fetchone() is not None:
                conn.execute("INSERT INTO drafts (chat, text, updated) VALUES (?, ?, ?)"
                             " ON CONFLICT(chat) DO UPDATE SET text = excluded.text, updated = excluded.updated",
                             (key, text, now))
