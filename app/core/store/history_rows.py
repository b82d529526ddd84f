"""The history's rows as values and back: message and conversation columns, and the search copy of a message."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from app.core.answer_stats import AnswerStats
from app.core.attachment_data import (
    attachments_from_json,
    checked_attachments,
    checked_sources,
    collections_from_json,
    sources_from_json,
)
from app.core.attachments import AttachedFile, SourceRef
from app.core.conversation import Conversation, Message, MessageState, Part, Role
from app.core.generation import GenerationSettings
from app.core.memories import memory_ids_from_json
from app.core.store.history_schema import search_fold
from app.core.message_parts import checked_parts, parts_from_json, searchable_text

# messages.folded is the search's copy of the text; reading a message never needs it.
MESSAGE_COLUMNS = ("id, conversation_id, role, text, created, state, stats, thinking, parts, attachments, sources,"
                   " memories")


def fold_or_null(text: str | None) -> str | None:
    """search_fold for SQL, where a column may be NULL."""
    return None if text is None else search_fold(text)


def message_fold(text: str, parts: Sequence[Part], attachments: Sequence[AttachedFile] = ()) -> str:
    """A message's search copy: its text, then what else search finds in its parts, then the
    names of the files attached to it.

    A file's name, not its path (every file under "Documents" would find every chat with one)
    and not its text: a file holds up to MAX_ATTACHED_CHARS, which the trigram index would
    hold three times over on every search, and a chat would then be found by any word of a
    long report it once attached, burying the chats where the user wrote that word. The
    user remembers a chat by what was said in it and by which file it was about.
    """
    extra = "\n".join(found for found in (searchable_text(parts), *(file.name for file in attachments)) if found)
    return search_fold(f"{text}\n{extra}" if extra else text)


def fold_stored_message(text: str | None, parts: str | None, attachments: str | None) -> str | None:
    """message_fold over a row's columns, for SQL (a row another program wrote included)."""
    return None if text is None else message_fold(text, parts_from_json(parts), attachments_from_json(attachments))


def fts5_phrase(text: str) -> str:
    """`text` as one FTS5 phrase, so no character of it is query syntax."""
    return '"' + text.replace('"', '""') + '"'


def inserted_id(cursor: sqlite3.Cursor) -> int:
    """The row id an INSERT just made (sqlite3 types it Optional for other statements)."""
    row_id = cursor.lastrowid
    if row_id is None:
        raise RuntimeError("INSERT gave no row id")
    return row_id


def parts_for(role: Role, parts: Sequence[Part]) -> tuple[Part, ...]:
    """The parts checked for keeping; ValueError (a bug) if one is wrong or `role` has none."""
    if parts and role != Role.ASSISTANT:
        raise ValueError(f"a {role.value} message has no parts: only an answer uses tools.")
    return checked_parts(parts)


def attachments_for(role: Role, attachments: Sequence[AttachedFile]) -> tuple[AttachedFile, ...]:
    """The files checked for keeping; ValueError (a bug) if one is wrong or `role` is no user's."""
    if attachments and role != Role.USER:
        raise ValueError(f"a {role.value} message has no attachments: only the user attaches files.")
    return checked_attachments(attachments)


def sources_for(role: Role, sources: Sequence[SourceRef]) -> tuple[SourceRef, ...]:
    """The sources checked for keeping; ValueError (a bug) if one is wrong or `role` is no answer."""
    if sources and role != Role.ASSISTANT:
        raise ValueError(f"a {role.value} message has no sources: only an answer is given them.")
    return checked_sources(sources)


def stats_json(stats: AnswerStats | None) -> str | None:
    """The stats column's text (NULL for none)."""
    return None if stats is None else stats.to_json()


def conversation_from_row(row: sqlite3.Row) -> Conversation:
    """A conversation from `SELECT * FROM conversations`."""
    return Conversation(
        id=row["id"],
        title=row["title"],
        created=row["created"],
        updated=row["updated"],
        system_prompt=row["system_prompt"],
        settings=GenerationSettings.from_dict(json.loads(row["settings"])),
        model=row["model"],
        collections=collections_from_json(row["collections"]),
        memory=bool(row["memory"]),
        project_id=row["project_id"] if isinstance(row["project_id"], int) else None,
    )


def message_from_row(row: sqlite3.Row) -> Message:
    """A message from a row of MESSAGE_COLUMNS. A column that only another role uses (a row
    another program wrote) is left out, as are values this code would not write."""
    role = Role(row["role"])
    return Message(
        id=row["id"],
        conversation_id=row["conversation_id"],
        role=role,
        text=row["text"],
        created=row["created"],
        state=MessageState(row["state"]),
        stats=AnswerStats.from_json(row["stats"]),
        thinking=row["thinking"] or "",
        parts=parts_from_json(row["parts"]) if role == Role.ASSISTANT else (),
        attachments=attachments_from_json(row["attachments"]) if role == Role.USER else (),
        sources=sources_from_json(row["sources"]) if role == Role.ASSISTANT else (),
        memories=memory_ids_from_json(row["memories"]) if role == Role.ASSISTANT else (),
    )
