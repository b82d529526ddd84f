"""ProjectsDoor: the person's projects, for `kestrel projects`, `kestrel chat --project` and the window's project dialog."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.core.store.history import HistoryDamaged

if TYPE_CHECKING:
    from app.service.root import Service


class ProjectsDoor:
    """The projects (app/core/projects.py) and their chats; the calls are ProjectBook's own.

    listing() every project by name; find(name) -> Project | None (case aside); get(id). add(name,
    instructions, model=, tools=, collections=, memory=) and edit(id, ProjectChanges) -> Project.
    remove(id) -> the ids of its chats, kept in no project. chats(id) its chats, newest first.
    move(chat_id, project_id | None) -> the chat, in that project or none. start_chat(id) -> a new
    saved chat with all of the project (instructions as its system prompt, model, tools, collections,
    memory choice). export(id, path, replace=False) -> how many chats were written; import_file(path)
    -> ImportedProjectChats. history_damage: the history file was found damaged (the CLI leaves the
    choice to the window).

    Raises ProjectRefused (its words can be shown as they are), ProjectFileError (words naming the
    file), KeyError for an id that is not there and HistoryError when the disk refuses.
    """

    def __init__(self, service: Service) -> None:
        self._service = service
        book = service.projects
        self.listing = book.listing
        self.find = book.find
        self.get = book.get
        self.add = book.add
        self.edit = book.edit
        self.remove = book.remove
        self.chats = book.chats
        self.move = book.move
        self.start_chat = book.start_chat
        self.export = book.export
        self.import_file = book.import_file

    @property
    def history_damage(self) -> HistoryDamaged | None:
        return self._service.history_damage
