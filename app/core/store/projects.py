"""Projects in the history database: kept, listed, changed, removed (their chats kept), and their chats moved in and out."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from app.core.conversation import UNTITLED, Conversation, Message
from app.core.generation import GenerationSettings
from app.core.projects import (MAX_PROJECT_NAME, MAX_PROJECTS, Project, ProjectRefusal, ProjectRefused, project_instructions,
                               project_model, project_name, project_names_list, same_name)
from app.core.store.history import HistoryStore

_COLUMNS = PROJECT_COLUMNS = "id, name, instructions, model, tools, collections, memory, created, updated"


@dataclass(frozen=True)
class ProjectChanges:
    """What an edit changes; a field left None stays as it is (model "": back to the default model)."""

    name: str | None = None
    instructions: str | None = None
    model: str | None = None
    tools: Sequence[str] | None = None
    collections: Sequence[str] | None = None
    memory: bool | None = None


def project_from_row(row: Sequence[Any]) -> Project:
    """A project from a row of _COLUMNS; a list this code would not write reads as empty."""
    pid, name, instructions, model, tools, collections, memory, created, updated = row
    return Project(int(pid), str(name), str(instructions or ""), model if isinstance(model, str) else None,
                   _names(tools), _names(collections), bool(memory), float(created), float(updated))


def add_project(store: HistoryStore, name: str, instructions: str = "", *, model: str | None = None,
                tools: Sequence[str] = (), collections: Sequence[str] = (), memory: bool = True,
                clock: Callable[[], float] = time.time) -> Project:
    """Keep a new project; ProjectRefused if a field is past its bounds, the name is taken (case aside)
    or MAX_PROJECTS are kept already."""
    kept = _checked(name, instructions, model, tools, collections)
    with store.transaction() as conn:
        count = int(conn.execute("SELECT count(*) FROM projects").fetchone()[0])
        if count >= MAX_PROJECTS:
            raise ProjectRefused(ProjectRefusal.FULL, count=count)
        _refuse_taken(conn, kept[0], None)
        now = clock()
        cursor = conn.execute("INSERT INTO projects (name, instructions, model, tools, collections, memory, created,"
                              " updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (*kept, int(memory), now, now))
        return _read(conn, int(cursor.lastrowid or 0))


def list_projects(store: HistoryStore) -> list[Project]:
    """Every project, by name (case aside)."""
    with store.transaction() as conn:
        rows = conn.execute(f"SELECT {_COLUMNS} FROM projects").fetchall()
    return sorted((project_from_row(tuple(row)) for row in rows), key=lambda p: (p.name.casefold(), p.id))


def get_project(store: HistoryStore, project_id: int) -> Project:
    """The project with this id; KeyError if there is none."""
    with store.transaction() as conn:
        return _read(conn, project_id)


def find_project(store: HistoryStore, name: str) -> Project | None:
    """The project called `name` (case and runs of spaces aside), or None."""
    wanted = " ".join(name.split())
    return next((project for project in list_projects(store) if same_name(project.name, wanted)), None)


def edit_project(store: HistoryStore, project_id: int, changes: ProjectChanges, *,
                 clock: Callable[[], float] = time.time) -> Project:
    """Change the given fields; KeyError if there is no such project, ProjectRefused as add_project.
    The project's chats keep what they started with: a change shapes its new chats."""
    with store.transaction() as conn:
        old = _read(conn, project_id)
        name, instructions, model, tools, collections = _checked(
            old.name if changes.name is None else changes.name,
            old.instructions if changes.instructions is None else changes.instructions,
            old.model if changes.model is None else changes.model or None,
            old.tools if changes.tools is None else changes.tools,
            old.collections if changes.collections is None else changes.collections)
        _refuse_taken(conn, name, project_id)
        memory = old.memory if changes.memory is None else changes.memory
        conn.execute("UPDATE projects SET name = ?, instructions = ?, model = ?, tools = ?, collections = ?,"
                     " memory = ?, updated = ? WHERE id = ?",
                     (name, instructions, model, tools, collections, int(memory), clock(), project_id))
        return _read(conn, project_id)


def remove_project(store: HistoryStore, project_id: int) -> list[int]:
    """Remove a project; its chats are kept, in no project. The ids of those chats; KeyError if none."""
    with store.transaction() as conn:
        chats = [int(row[0]) for row in conn.execute("SELECT id FROM conversations WHERE project_id = ?",
                                                     (project_id,))]
        if conn.execute("DELETE FROM projects WHERE id = ?", (project_id,)).rowcount == 0:
            raise KeyError(project_id)
    return chats


def project_chats(store: HistoryStore, project_id: int) -> list[Conversation]:
    """The project's chats, the most recently updated first."""
    return [chat for chat in store.list_conversations() if chat.project_id == project_id]


def move_chat(store: HistoryStore, conversation_id: int, project_id: int | None) -> Conversation:
    """Put a chat in a project (None: in none). It keeps its own system prompt, model and settings (a
    project shapes the chats it starts), and its place in the list (no activity). KeyError if there is
    no such chat or project."""
    with store.transaction() as conn:
        if project_id is not None:
            _read(conn, project_id)
        if conn.execute("UPDATE conversations SET project_id = ? WHERE id = ?",
                        (project_id, conversation_id)).rowcount == 0:
            raise KeyError(conversation_id)
    return store.get_conversation(conversation_id)


def start_chat(store: HistoryStore, project: Project, settings: GenerationSettings,
               title: str = UNTITLED) -> Conversation:
    """A new, empty chat in the project, with all of it: its instructions as the chat's system prompt,
    its model, its tools (over `settings`, the new-chat defaults), its collections and its memory choice."""
    with store.transaction() as conn:
        made = store.create_conversation(title=title, system_prompt=project.instructions,
                                         settings=replace(settings, tools=project.tools), model=project.model,
                                         collections=project.collections)
        conn.execute("UPDATE conversations SET project_id = ?, memory = ? WHERE id = ?",
                     (project.id, int(project.memory), made.id))
    return store.get_conversation(made.id)


def import_project(store: HistoryStore, project: Project, chats: Sequence[tuple[Conversation, Sequence[Message]]],
                   *, clock: Callable[[], float] = time.time) -> tuple[Project, list[int]]:
    """Keep a project read from a file, with its chats, all in one transaction: all or nothing. Its name
    gets " (2)", " (3)"… where it is taken. The project as kept and its chats' new ids."""
    with store.transaction() as conn:
        name = _free_name(conn, project_name(project.name))
        made = add_project(store, name, project.instructions, model=project.model, tools=project.tools,
                           collections=project.collections, memory=project.memory, clock=clock)
        ids = []
        for conversation, messages in chats:
            chat_id = store.insert_conversation(conversation)
            for message in messages:
                store.insert_message(message, chat_id)
            conn.execute("UPDATE conversations SET project_id = ?, memory = ? WHERE id = ?",
                         (made.id, int(conversation.memory), chat_id))
            ids.append(chat_id)
    return made, ids


# --- a damaged history's replacement ------------------------------------------------------------


def restore_projects(store: HistoryStore, rows: Sequence[Sequence[Any]],
                     placed: Sequence[Sequence[Any]]) -> int:
    """Keep projects read from a damaged file (rows of PROJECT_COLUMNS) with their ids, and put back
    which chats were in them (`placed`: rows of conversations' id, project_id) where both are here; how
    many projects. A row this code would not write, a name kept already or one past MAX_PROJECTS is left out."""
    kept: set[int] = set()
    with store.transaction() as conn:
        names = {str(row[0]).casefold() for row in conn.execute("SELECT name FROM projects")}
        for row in rows:
            try:
                project = project_from_row(row)
                fields = _checked(project.name, project.instructions, project.model, project.tools,
                                  project.collections)
            except (TypeError, ValueError, ProjectRefused):
                continue
            if fields[0].casefold() in names or len(names) >= MAX_PROJECTS:
                continue
            conn.execute("INSERT OR IGNORE INTO projects (id, name, instructions, model, tools, collections, memory,"
                         " created, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (project.id, *fields, int(project.memory), project.created, project.updated))
            names.add(fields[0].casefold())
            kept.add(project.id)
        for chat_id, project_id in placed:
            if project_id in kept:
                conn.execute("UPDATE conversations SET project_id = ? WHERE id = ?", (project_id, chat_id))
    return len(kept)


# --- helpers -------------------------------------------------------------------------------------


def _checked(name: str, instructions: str, model: str | None, tools: Sequence[str],
             collections: Sequence[str]) -> tuple[str, str, str | None, str, str]:
    """The fields as the row keeps them (the lists as JSON); ProjectRefused as the checks say."""
    return (project_name(name), project_instructions(instructions), project_model(model),
            _json(project_names_list(_listed(tools), "tools")),
            _json(project_names_list(_listed(collections), "collections")))


def _listed(items: Sequence[str]) -> Sequence[str]:
    # A str is a Sequence[str]: one name passed bare is refused by the check, not split into letters.
    return items if isinstance(items, str) else tuple(items)


def _refuse_taken(conn: sqlite3.Connection, name: str, own_id: int | None) -> None:
    for other_id, other in conn.execute("SELECT id, name FROM projects"):
        if other_id != own_id and same_name(str(other), name):
            raise ProjectRefused(ProjectRefusal.NAME_TAKEN, str(other))


def _free_name(conn: sqlite3.Connection, name: str) -> str:
    taken = [str(row[0]).casefold() for row in conn.execute("SELECT name FROM projects")]
    number, free = 1, name
    while free.casefold() in taken:
        number += 1
        suffix = f" ({number})"
        free = name[:MAX_PROJECT_NAME - len(suffix)] + suffix
    return free


def _read(conn: sqlite3.Connection, project_id: int) -> Project:
    row = conn.execute(f"SELECT {_COLUMNS} FROM projects WHERE id = ?", (project_id,)).fetchone()
    if row is None:
        raise KeyError(project_id)
    return project_from_row(tuple(row))


def _json(names: tuple[str, ...]) -> str:
    return json.dumps(list(names), ensure_ascii=False, separators=(",", ":"))


def _names(stored: object) -> tuple[str, ...]:
    if not isinstance(stored, str):
        return ()
    try:
        data = json.loads(stored)
    except (ValueError, RecursionError):
        return ()
    if not isinstance(data, list):
        return ()
    return tuple(item for item in data if isinstance(item, str))
