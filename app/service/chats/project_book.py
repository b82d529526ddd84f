"""ProjectBook: the projects for every front end, a project's new chat with all of it, chats moved in and out, and project files."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.core.conversation import Conversation, Message
from app.core.files import Refusal, TargetRefused, write_user_file
from app.core.generation import GenerationSettings
from app.core.project_export import ImportedProject, ProjectFileError, read_project, to_json
from app.core.projects import Project
from app.core.store.history import HistoryError, HistoryStore
from app.core.store.projects import (ProjectChanges, add_project, edit_project, find_project, get_project,
                                     import_project, list_projects, move_chat, project_chats, remove_project,
                                     start_chat)
from app.service.chats.imported_images import check_imported_images
from app.service.documents.attached_images import CheckImages, in_worker, not_started
from app.service.events import ConversationChanged, Event
from app.service.storage import Storage


@dataclass(frozen=True)
class ImportedProjectChats:
    """What an import kept: the project (its name may have gained " (2)") and its chats' ids;
    `left_out` says which images the image check refused ("" for none)."""

    project: Project
    chat_ids: tuple[int, ...]
    left_out: str = ""


class ProjectBook:
    """The projects, kept in the history file (app/core/store/projects.py) and read on its writer thread.

    A chat moved or started is said with ConversationChanged (moved: in its place), so the chat list and
    the open chat follow. Methods raise ProjectRefused (the person's input: its words can be shown as they
    are), KeyError for a project or chat that is not there, HistoryError for the disk, and ProjectFileError
    (words naming the file) for a file that will not do.
    """

    def __init__(self, storage: Callable[[], Storage], emit: Callable[[Event], None],
                 new_chat_settings: Callable[[], GenerationSettings], *, check: CheckImages = in_worker) -> None:
        self._storage, self._emit, self._new_chat_settings, self._check = storage, emit, new_chat_settings, check

    async def listing(self) -> list[Project]:
        """Every project, by name."""
        return await self._storage().history(list_projects)

    async def find(self, name: str) -> Project | None:
        """The project called `name` (case aside), or None."""
        return await self._storage().history(find_project, name)

    async def get(self, project_id: int) -> Project:
        return await self._storage().history(get_project, project_id)

    async def add(self, name: str, instructions: str = "", *, model: str | None = None, tools: tuple[str, ...] = (),
                  collections: tuple[str, ...] = (), memory: bool = True) -> Project:
        """Keep a new project."""
        return await self._storage().history(add_project, name, instructions, model=model, tools=tools,
                                             collections=collections, memory=memory)

    async def edit(self, project_id: int, changes: ProjectChanges) -> Project:
        """Change a project; its chats keep what they started with, its new chats take the change."""
        return await self._storage().history(edit_project, project_id, changes)

    async def remove(self, project_id: int) -> list[int]:
        """Remove a project; its chats are kept, in no project (their ids, each said changed)."""
        freed = await self._storage().history(remove_project, project_id)
        for chat_id in freed:
            self._emit(ConversationChanged(await self._storage().history(HistoryStore.get_conversation, chat_id),
                                           to_top=False))
        return freed

    async def chats(self, project_id: int) -> list[Conversation]:
        """The project's chats, the most recently updated first."""
        return await self._storage().history(project_chats, project_id)

    async def move(self, conversation_id: int, project_id: int | None) -> Conversation:
        """Put a saved chat in a project, or (None) in none; it keeps its settings and its place in the list."""
        moved = await self._storage().history(move_chat, conversation_id, project_id)
        self._emit(ConversationChanged(moved, to_top=False))
        return moved

    async def start_chat(self, project_id: int) -> Conversation:
        """A new, empty chat in the project, saved now with all of it: its instructions as the system prompt,
        its model, tools, collections and memory choice (the app's new-chat settings for the rest)."""
        storage = self._storage()
        project = await storage.history(get_project, project_id)
        made = await storage.history(start_chat, project, self._new_chat_settings())
        self._emit(ConversationChanged(made))
        return made

    # --- files ---------------------------------------------------------------------------------

    async def export(self, project_id: int, path: Path, *, replace: bool = False) -> int:
        """Write the project and all its chats to `path` (a new file, or with replace the regular file there);
        how many chats it holds. ProjectFileError (words) if the file cannot be written there."""
        project, chats = await self._storage().history(_read_whole, project_id)
        text = await asyncio.to_thread(to_json, project, chats)
        try:
            await asyncio.to_thread(write_user_file, path, text.encode("utf-8"), replace=replace)
        except TargetRefused as refused:
            raise ProjectFileError(_refusal_words(refused)) from None
        except OSError as exc:
            raise ProjectFileError(f"The project could not be saved as {path} ({exc.strerror or exc}). Choose "
                                   "another folder, or free some space, then try again.") from None
        return len(chats)

    async def import_file(self, path: Path) -> ImportedProjectChats:
        """Add the project in `path` with all its chats (all or nothing)."""
        imported: ImportedProject = await asyncio.to_thread(read_project, path)
        chats, left_out = [], []
        for number, chat in enumerate(imported.chats, start=1):
            if not any(message.images for message in chat.messages):
                chats.append((chat.conversation, chat.messages))
                continue
            try:
                checked = await asyncio.to_thread(check_imported_images, chat, self._check)
            except RuntimeError as exc:
                raise ProjectFileError(f"The project in {path} was not imported: {not_started(exc)}") from None
            chats.append((checked.chat.conversation, checked.chat.messages))
            if checked.left_out:
                left_out.append(f"chat {number}: {checked.left_out}")
        try:
            project, ids = await self._storage().history(import_project, imported.project, chats)
        except HistoryError as exc:
            raise HistoryError(f"The project in {path} could not be imported: {exc}") from exc
        for chat_id in ids:
            self._emit(ConversationChanged(await self._storage().history(HistoryStore.get_conversation, chat_id),
                                           to_top=False))
        return ImportedProjectChats(project, tuple(ids), "; ".join(left_out))


def _read_whole(store: HistoryStore, project_id: int) -> tuple[Project, list[tuple[Conversation, list[Message]]]]:
    """The project and its chats with their messages, oldest chat first (the order they import in)."""
    with store.transaction():
        project = get_project(store, project_id)
        chats = list(reversed(project_chats(store, project_id)))
        return project, [(chat, store.messages(chat.id)) for chat in chats]


def _refusal_words(refused: TargetRefused) -> str:
    path = refused.path
    if refused.refusal is Refusal.EXISTS:
        return f"The project was not exported: {path} already exists, and Kestrel replaces a file only when asked to."
    if refused.refusal is Refusal.LINK:
        return (f"The project was not exported: {path} is a link to another file, and Kestrel does not write through "
                "links. Name the file itself, or choose a new name.")
    if refused.refusal is Refusal.NOT_A_FILE:
        return f"The project was not exported: {path} is {refused.what}, not a file. Choose a file name."
    if refused.what:
        return f"The project was not exported as {path}: {path.parent} is not a folder. Choose another folder."
    return (f"The project was not exported as {path}: the folder {path.parent} does not exist. Choose another "
            "folder, or create that one first.")
