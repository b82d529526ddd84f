"""ProjectScope: which chats the chat list shows, the search's finds narrowed to the chosen project's chats."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from app.core.conversation import Conversation


class ProjectScope:
    """Keeps the search's matches (None: no search) and the chosen project's chats (None: all chats) and
    gives the list filter what both allow (`show`, ConversationFilter.set_matches). The project's chats
    follow every chat said changed (ConversationChanged carries its project) and removed."""

    def __init__(self, show: Callable[[set[int] | None], None]) -> None:
        self._show = show
        self._search: set[int] | None = None
        self._chats: set[int] | None = None
        self.project_id: int | None = None

    def set_search(self, matches: set[int] | None) -> None:
        """The chats the search found (None: no search)."""
        self._search = matches
        self._apply()

    def set_project(self, project_id: int | None, chat_ids: Iterable[int] = ()) -> None:
        """Show only this project's chats (None: every chat)."""
        self.project_id = project_id
        self._chats = None if project_id is None else set(chat_ids)
        self._apply()

    def heard(self, conversation: Conversation) -> None:
        """A chat was made or changed: in the chosen project now, or no longer."""
        if self._chats is None:
            return
        inside = conversation.project_id == self.project_id
        if inside != (conversation.id in self._chats):
            (self._chats.add if inside else self._chats.discard)(conversation.id)
            self._apply()

    def removed(self, conversation_id: int) -> None:
        if self._chats is not None:
            self._chats.discard(conversation_id)

    def _apply(self) -> None:
        if self._chats is None:
            self._show(self._search)
        else:
            self._show(self._chats if self._search is None else self._chats & self._search)
