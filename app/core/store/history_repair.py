"""A damaged history file: set it aside unchanged, start a fresh one, recover what can be read.

Nothing here runs unless the user chose it. The damaged file (and its WAL) is only ever
renamed, never written: recovery reads a copy of it. The new history is built under a
temporary name first and takes the history's name only once it is complete, so a
failure half-way leaves the damaged file where it was.

Python's sqlite3 has no `.recover` (that is the sqlite3 shell's), and `VACUUM INTO`
gives up at the first damaged page, so recovery reads each table by row id and steps
over what SQLite cannot read (`_readable_rows`).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core.answer_stats import AnswerStats
from app.core.attachment_data import attachments_from_json, attachments_json, collections_from_json, sources_from_json
from app.core.attachments import MAX_IMAGES, AttachedFile, AttachedImage, SourceRef
from app.core.conversation import Conversation, Message, MessageState, Part, Role
from app.core.generation import GenerationSettings
from app.core.store.history import HistoryError, HistoryStore
from app.core.store.history_images import image_from_row, store_images
from app.core.store.memories import MEMORY_COLUMNS, memory_rows, restore_memories
from app.core.store.projects import PROJECT_COLUMNS, restore_projects
from app.core.store.history_schema import MIGRATIONS, is_damage
from app.core.message_parts import parts_from_json

# SQLite's companions of a database file: its WAL (committed data not yet copied into
# the file), the WAL's index, a rollback journal. They travel with the file.
COMPANIONS = ("-wal", "-shm", "-journal")
RECOVERED_TITLE = "Recovered chat"
# A recovered message's columns that the first format lacks: id, thinking, parts,
# attachments, sources; and a recovered conversation's: its collections, by id.
Later = tuple[int, str, tuple[Part, ...], tuple[AttachedFile, ...], tuple[SourceRef, ...]]
LaterCollections = dict[int, tuple[str, ...]]
# A recovered user message's images, by its id: a table the first format lacks.
LaterImages = dict[int, list[AttachedImage]]


@dataclass(frozen=True)
class Replacement:
    """A new history took the damaged one's place.

    `aside` is where the damaged file now is (None if it was gone already);
    `conversations` and `messages` how many were recovered from it; `carried` maps the
    ids of the chats copied from the history used meanwhile to their ids in the new one.
    """

    aside: Path | None
    conversations: int = 0
    messages: int = 0
    carried: dict[int, int] = field(default_factory=dict)


def replace_damaged(path: Path, *, recover: bool, carry: HistoryStore | None = None,
                    clock: Callable[[], float] = time.time) -> Replacement:
    """Build a new history for `path`, then set the damaged file aside and put it in place.

    recover: copy every conversation and message SQLite can still read into it. carry:
    a history whose chats (written while the damaged one was set aside, in memory) go
    into the new one too. The file at `path` must not be open. HistoryError if the
    disk refuses; the damaged file is then still at `path`.
    """
    building = path.with_name(f"{path.name}.new")
    _remove_with_companions(building)
    conversations = messages = 0
    carried: dict[int, int] = {}
    later: list[Later] = []
    collections: LaterCollections = {}
    images: LaterImages = {}
    memories: list[tuple[Any, ...]] = []
    projects: tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]] = ([], [])
    try:
        if recover and path.exists():
            conversations, messages, later, collections, images, memories, projects = _recover_into(path, building)
        # Opening it migrates what was recovered (written in the first format) to the
        # current one: the search index is built once, not row by row (3x faster).
        with HistoryStore(building, clock=clock) as store:
            _restore_later_columns(store, later, collections, images)
            restore_memories(store, memories)
            restore_projects(store, *projects)
            if carry is not None:
                carried = copy_conversations(carry, store)
                restore_memories(store, [(None, *row[1:4], carried.get(row[4]), row[5])
                                         for row in memory_rows(carry)])
        aside = set_aside(path, clock)
        _replace(building, path)
    except (OSError, sqlite3.Error) as error:
        _remove_with_companions(building)
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise HistoryError(
            f"Kestrel could not set up a new chat history next to {path} ({reason}). The "
            "damaged file is still there, unchanged. Check the disk, then try again."
        ) from error
    except BaseException:
        _remove_with_companions(building)
        raise
    return Replacement(aside, conversations, messages, carried)


def set_aside(path: Path, clock: Callable[[], float] = time.time) -> Path | None:
    """Rename the file at `path` (with its companions) to a name with the time; return it.

    history.sqlite3 becomes history.damaged-20260509-143000.sqlite3 in the same folder.
    None if there was no file.
    """
    if not path.exists():
        return None
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(clock()))
    aside = path.with_name(f"{path.stem}.damaged-{stamp}{path.suffix}")
    counter = 1
    while any(Path(f"{aside}{suffix}").exists() for suffix in ("", *COMPANIONS)):
        counter += 1
        aside = path.with_name(f"{path.stem}.damaged-{stamp}-{counter}{path.suffix}")
    # The companions first: a WAL left behind at the old name would be replayed into
    # the next history opened there.
    for suffix in COMPANIONS:
        if Path(f"{path}{suffix}").exists():
            os.replace(f"{path}{suffix}", f"{aside}{suffix}")
    os.replace(path, aside)
    return aside


def copy_conversations(source: HistoryStore, target: HistoryStore) -> dict[int, int]:
    """Copy every conversation of `source` into `target` under new ids; old id → new id."""
    carried: dict[int, int] = {}
    with target.transaction():
        for conversation in reversed(source.list_conversations()):
            new_id = target.insert_conversation(conversation)
            for message in source.messages(conversation.id):
                target.insert_message(message, new_id)
            carried[conversation.id] = new_id
    return carried


def _recover_into(damaged_path: Path, building: Path) -> tuple[
        int, int, list[Later], LaterCollections, LaterImages, list[tuple[Any, ...]],
        tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]]:
    """Write what SQLite can read of the history at `damaged_path` into a new database
    at `building`, in the history's first format (ids kept).

    Reads a copy, so the damaged file and its WAL stay byte for byte as they were.
    Messages whose conversation row is lost get a conversation of their own, titled
    from their first message. Returns (conversations, messages) recovered, and the
    messages with a thinking, parts, attachments or sources and the conversations with
    collections (columns the first format lacks), the user messages' images, the memories and the
    projects with which chat was in which (tables it lacks) to restore once the new file has them.
    """
    with tempfile.TemporaryDirectory(prefix=".kestrel-recovery-", dir=damaged_path.parent) as folder:
        copy = Path(folder) / "damaged.sqlite3"
        shutil.copyfile(damaged_path, copy)
        wal = Path(f"{damaged_path}-wal")
        if wal.exists():
            shutil.copyfile(wal, f"{copy}-wal")
        source = sqlite3.connect(copy, isolation_level=None)
        target = sqlite3.connect(building, isolation_level=None)
        try:
            target.execute("BEGIN IMMEDIATE")
            MIGRATIONS[0](target)
            target.execute("PRAGMA user_version = 1")
            conversations, messages, later, collections, users = _copy_readable(source, target)
            target.execute("COMMIT")
            memories = list(_readable_rows(source, "memories", MEMORY_COLUMNS))
            # A file from before projects has no such table or column: nothing is read then.
            projects = (list(_readable_rows(source, "projects", PROJECT_COLUMNS)),
                        list(_readable_rows(source, "conversations", "id, project_id")))
            return conversations, messages, later, collections, _readable_images(source, users), memories, projects
        finally:
            target.close()
            source.close()


def _readable_images(source: sqlite3.Connection, users: set[int]) -> LaterImages:
    """The images SQLite can still read of the recovered user messages `users`, in order; one it
    cannot (damaged, or not what this code writes) is left out, and its message keeps the rest."""
    found: dict[int, dict[int, AttachedImage]] = {}
    for row in _readable_rows(source, "message_images",
                              "id, message_id, position, name, mime, width, height, note, data"):
        message_id, position = row[1], row[2]
        if message_id not in users or not isinstance(position, int):
            continue
        image = image_from_row(row[3:])
        if image is not None:
            found.setdefault(message_id, {})[position] = image
    return {message_id: [by[p] for p in sorted(by)][:MAX_IMAGES] for message_id, by in found.items()}


def _restore_later_columns(store: HistoryStore, later: list[Later], collections: LaterCollections,
                           images: LaterImages) -> None:
    """Put back the columns (and images) that came after the first format, in the migrated file."""
    with store.transaction() as conn:
        for message_id, kept in images.items():
            store_images(conn, message_id, kept)
        for message_id, thinking, parts, files, sources in later:
            store.update_message(message_id, thinking=thinking, parts=parts,
                                 sources=sources if sources else None)
            if files:
                # No method sets a message's files after it is written (a question keeps
                # what it was sent with); the search copy takes their names as add_message's does.
                conn.execute("UPDATE messages SET attachments = :files,"
                             " folded = kestrel_fold_message(text, parts, :files) WHERE id = :id",
                             {"files": attachments_json(files), "id": message_id})
        for conversation_id, names in collections.items():
            store.set_collections(conversation_id, names)


def _later_columns(conn: sqlite3.Connection, table: str, later: tuple[tuple[str, str], ...]) -> str:
    """The columns of a damaged file's `table` that came after the first format (`later`:
    each with its stand-in), or the stand-ins for a file from before them (and for one
    whose table list cannot be read)."""
    try:
        found = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    except sqlite3.DatabaseError:
        found = set()
    return ", ".join(column if column in found else stand_in for column, stand_in in later)


_LATER_MESSAGE_COLUMNS = (("thinking", "''"), ("parts", "'[]'"), ("attachments", "'[]'"), ("sources", "'[]'"))
_LATER_CONVERSATION_COLUMNS = (("collections", "'[]'"),)


def _copy_readable(source: sqlite3.Connection,
                   target: sqlite3.Connection) -> tuple[int, int, list[Later], LaterCollections, set[int]]:
    kept: set[int] = set()
    collections: LaterCollections = {}
    columns = ("id, title, created, updated, system_prompt, settings, model, "
               + _later_columns(source, "conversations", _LATER_CONVERSATION_COLUMNS))
    for row in _readable_rows(source, "conversations", columns):
        conversation = _conversation_from(row)
        if conversation is not None:
            _insert_conversation(target, conversation)
            kept.add(conversation.id)
            if conversation.collections:
                collections[conversation.id] = conversation.collections
    made: dict[int, Message] = {}  # conversations made for orphans: the message to title them by
    last: dict[int, float] = {}
    later: list[Later] = []
    users: set[int] = set()
    messages = 0
    columns = "id, conversation_id, role, text, created, state, stats, " + _later_columns(
        source, "messages", _LATER_MESSAGE_COLUMNS)
    for row in _readable_rows(source, "messages", columns):
        message = _message_from(row)
        if message is None:
            continue
        if message.thinking or message.parts or message.attachments or message.sources:
            later.append((message.id, message.thinking, message.parts, message.attachments, message.sources))
        conversation_id = message.conversation_id
        if conversation_id not in kept and conversation_id not in made:
            _insert_conversation(target, Conversation(conversation_id, RECOVERED_TITLE, message.created,
                                                      message.created, "", GenerationSettings(), None))
            made[conversation_id] = message
        elif conversation_id in made and made[conversation_id].role != Role.USER and message.role == Role.USER:
            made[conversation_id] = message  # the title comes from the first user message
        target.execute(
            "INSERT INTO messages (id, conversation_id, role, text, created, state, stats)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (message.id, conversation_id, message.role.value, message.text, message.created,
             message.state.value, None if message.stats is None else message.stats.to_json()))
        last[conversation_id] = max(last.get(conversation_id, 0.0), message.created)
        messages += 1
        if message.role == Role.USER:
            users.add(message.id)
    for conversation_id, first in made.items():
        title = _title_from(first.text) if first.role == Role.USER else RECOVERED_TITLE
        target.execute("UPDATE conversations SET title = ?, updated = ? WHERE id = ?",
                       (title, last[conversation_id], conversation_id))
    return len(kept) + len(made), messages, later, collections, users


def _insert_conversation(target: sqlite3.Connection, conversation: Conversation) -> None:
    target.execute(
        "INSERT INTO conversations (id, title, created, updated, system_prompt, settings, model)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (conversation.id, conversation.title, conversation.created, conversation.updated,
         conversation.system_prompt, json.dumps(conversation.settings.to_dict()), conversation.model))


def _readable_rows(conn: sqlite3.Connection, table: str, columns: str) -> Iterator[tuple[Any, ...]]:
    """Every row of `table` SQLite can still read, in row-id order, stepping over damage.

    A scan stops at the first damaged page; the next one starts just past it, found by
    seeking from the table's root (a seek into a damaged page fails, one past it works).
    `table` and `columns` are fixed names from this module, never user input.
    """
    after = -(2**63)
    while True:
        try:
            for row in conn.execute(f"SELECT {columns} FROM {table} WHERE id > ? ORDER BY id", (after,)):
                after = row[0]
                yield tuple(row)
            return
        except sqlite3.DatabaseError as error:
            if not is_damage(error):
                return  # no such table (not a Kestrel history), or the like: nothing here
        resumed = _past_damage(conn, table, after)
        if resumed is None:
            return
        after = resumed


def _past_damage(conn: sqlite3.Connection, table: str, after: int) -> int | None:
    """The smallest id past `after` from which SQLite can seek into `table` again."""

    def seekable(beyond: int) -> bool:
        try:
            conn.execute(f"SELECT id FROM {table} WHERE id > ? ORDER BY id LIMIT 1", (beyond,)).fetchone()
        except sqlite3.DatabaseError:
            return False
        return True

    top = 2**62
    try:
        highest = conn.execute(f"SELECT max(id) FROM {table}").fetchone()[0]
        if isinstance(highest, int):
            top = highest
    except sqlite3.DatabaseError:
        pass
    failed, step = after, 1
    while not seekable(after + step):
        failed = after + step
        if failed >= top:
            return None
        step *= 2
    found = after + step
    while found - failed > 1:  # the first seekable id between the two
        middle = (failed + found) // 2
        if seekable(middle):
            found = middle
        else:
            failed = middle
    return found


def _conversation_from(row: tuple[Any, ...]) -> Conversation | None:
    """A conversation from a damaged file's row, or None if the row is unusable."""
    cid, title, created, updated, system_prompt, settings, model, collections = row
    if not isinstance(cid, int) or not isinstance(created, (int, float)):
        return None
    try:
        generation = GenerationSettings.from_dict(json.loads(settings)).validated()
    except (TypeError, ValueError, AttributeError):
        generation = GenerationSettings()
    return Conversation(
        id=cid,
        title=title if isinstance(title, str) and title.strip() else RECOVERED_TITLE,
        created=float(created),
        updated=float(updated) if isinstance(updated, (int, float)) else float(created),
        system_prompt=system_prompt if isinstance(system_prompt, str) else "",
        settings=generation,
        model=model if isinstance(model, str) else None,
        collections=collections_from_json(collections),
    )


def _message_from(row: tuple[Any, ...]) -> Message | None:
    """A message from a damaged file's row, or None if the row is unusable."""
    mid, conversation_id, role, text, created, state, stats, thinking, parts, files, sources = row
    if (not isinstance(mid, int) or not isinstance(conversation_id, int) or not isinstance(text, str)
            or not isinstance(created, (int, float))):
        return None
    try:
        role = Role(role)
        state = MessageState(state)
    except ValueError:
        return None
    if state == MessageState.STREAMING:
        state = MessageState.INTERRUPTED  # nothing is writing it any more
    return Message(mid, conversation_id, role, text, float(created), state, AnswerStats.from_json(stats),
                   thinking if isinstance(thinking, str) else "",
                   parts_from_json(parts) if role == Role.ASSISTANT else (),
                   attachments_from_json(files) if role == Role.USER else (),
                   sources_from_json(sources) if role == Role.ASSISTANT else ())


def _title_from(text: str) -> str:
    lines = text.strip().splitlines()
    first = lines[0] if lines else RECOVERED_TITLE
    return first if len(first) <= 48 else first[:47].rstrip() + "…"


def _replace(source: Path, target: Path) -> None:
    """Move a closed database to `target` (its WAL, merged when it closed, is gone;
    one still there travels with it, companions first as in set_aside)."""
    for suffix in COMPANIONS:
        if Path(f"{source}{suffix}").exists():
            os.replace(f"{source}{suffix}", f"{target}{suffix}")
    os.replace(source, target)


def _remove_with_companions(path: Path) -> None:
    for suffix in ("", *COMPANIONS):
        try:
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        except OSError:
            pass
