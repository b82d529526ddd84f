"""A project as a file: JSON (format "kestrel-project", version 1) holding the project and its chats, each as a chat export.

Pure functions over Project, Conversation and Message values: the service reads the history and
writes the file. Import trusts nothing in the file: it is refused unread when too big, every
field of the project is checked as one typed by hand would be (app/core/projects.py), and each
chat as an imported chat is (app/core/chat_export.py). Instructions that look like a template's
control tokens are kept as text: the engine reads a system prompt's text as text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app.core.chat_export import ImportedChat, chat_data, chat_from_data
from app.core.conversation import Conversation, Message
from app.core.files import FileTooBig, NotAFile, read_chosen_file
from app.core.projects import (Project, ProjectRefused, project_instructions, project_model, project_name,
                               project_names_list)

FORMAT = "kestrel-project"
VERSION = 1
SUFFIX = ".kestrel-project"
# The whole file is read into memory: as big as one chat export may be, for all the project's chats.
MAX_BYTES = 256 * 1024 * 1024
MAX_CHATS = 10_000
# All the chats' messages together (one chat holds at most chat_export.MAX_MESSAGES).
MAX_MESSAGES = 1_000_000


class ProjectFileError(Exception):
    """A project file cannot be imported; the message names the file and what is wrong."""


@dataclass(frozen=True)
class ImportedProject:
    """A project read from a file (id 0) and its chats (ids 0), in the file's order."""

    project: Project
    chats: tuple[ImportedChat, ...]


def to_json(project: Project, chats: list[tuple[Conversation, list[Message]]]) -> str:
    """The project and its chats as a .kestrel-project file's text (standard JSON)."""
    data = {"format": FORMAT, "version": VERSION,
            "project": {key: value for key, value in project.to_dict().items() if key != "id"},
            "chats": [{**chat_data(conversation, messages), "memory": conversation.memory}
                      for conversation, messages in chats]}
    return json.dumps(data, ensure_ascii=False, indent=1, allow_nan=False)


def read_project(path: Path) -> ImportedProject:
    """Read and check a .kestrel-project file; ProjectFileError saying what is wrong with it."""
    try:
        raw = _read_regular_file(path)
    except OSError as exc:
        raise ProjectFileError(f"{path} could not be read ({exc.strerror or exc}).") from exc
    if len(raw) > MAX_BYTES:
        raise ProjectFileError(f"{path} is too big to be a Kestrel project (more than {MAX_BYTES // 2**20} MiB).")
    try:
        data = json.loads(raw.decode("utf-8-sig"))  # utf-8-sig: an editor's byte-order mark
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProjectFileError(f"{path} is not a Kestrel project: it is not valid JSON.") from exc
    try:
        return project_from_data(data)
    except (ValueError, ProjectRefused) as exc:
        raise ProjectFileError(f"{path} cannot be imported: {exc}") from exc


def project_from_data(data: Any) -> ImportedProject:
    """The project and chats of a file's JSON value; ValueError or ProjectRefused saying what is wrong."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f'it is not a Kestrel project (no "format": "{FORMAT}").')
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= VERSION:
        raise ValueError(f"it has project format version {version!r}; this Kestrel reads version {VERSION}. "
                         "Update Kestrel to import it.")
    fields = data.get("project")
    if not isinstance(fields, dict):
        raise ValueError('"project" must be an object.')
    memory = fields.get("memory", True)
    if not isinstance(memory, bool):
        raise ValueError("the project's memory must be true or false.")
    instructions = fields.get("instructions", "")
    if not isinstance(instructions, str):
        raise ValueError("the project's instructions must be a text.")
    name = fields.get("name")
    if not isinstance(name, str):
        raise ValueError("the project's name must be a text.")
    project = Project(0, project_name(name), project_instructions(instructions), project_model(fields.get("model")),
                      project_names_list(fields.get("tools", []), "tools"),
                      project_names_list(fields.get("collections", []), "collections"), memory)
    items = data.get("chats", [])
    if not isinstance(items, list):
        raise ValueError('"chats" must be a list.')
    if len(items) > MAX_CHATS:
        raise ValueError(f"it has {len(items):,} chats; a project imports at most {MAX_CHATS:,}.")
    chats, messages = [], 0
    for number, item in enumerate(items, start=1):
        try:
            chat = chat_from_data(item)
        except ValueError as exc:
            raise ValueError(f"chat {number}: {exc}") from None
        messages += len(chat.messages)
        if messages > MAX_MESSAGES:
            raise ValueError(f"its chats hold more than {MAX_MESSAGES:,} messages, the most a project imports.")
        chat_memory = item.get("memory", True)
        if not isinstance(chat_memory, bool):
            raise ValueError(f"chat {number}: memory must be true or false.")
        chats.append(ImportedChat(replace(chat.conversation, memory=chat_memory), chat.messages))
    return ImportedProject(project, tuple(chats))


def _read_regular_file(path: Path) -> bytes:
    """Up to MAX_BYTES + 1 bytes of path; ProjectFileError if it is no regular file or too big."""
    try:
        return read_chosen_file(path, MAX_BYTES)
    except NotAFile as exc:
        raise ProjectFileError(f"{path} is not a file (it is {exc.kind}): choose a {SUFFIX} file.") from None
    except FileTooBig as exc:
        raise ProjectFileError(f"{path} is too big to be a Kestrel project ({exc.size / 2**20:,.1f} MiB; "
                               f"the limit is {MAX_BYTES // 2**20} MiB).") from None
