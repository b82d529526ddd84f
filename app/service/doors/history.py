"""The saved chats' doors: the window's chat list (HistoryDoor) and chats to and from files (ChatFilesDoor)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from app.core.store.history import HistoryDamaged

if TYPE_CHECKING:
    from app.service.root import Service


class HistoryDoor:
    """The window's chat list: rename and search a chat, which chats have a draft, the history
    as another Kestrel process left it (`follow_history`, on HistoryChangedElsewhere), and the
    user's choice for a damaged history (`recover_history`: what SQLite can still read goes into
    a fresh one; `start_fresh_history`: an empty one; either keeps the damaged file under a new
    name, and is refused, said, while an answer runs)."""

    def __init__(self, service: Service) -> None:
        self._drafts = service.drafts
        self.rename_conversation = service.conversations.rename
        self.search = service.conversations.search
        self.follow_history = service.elsewhere.follow
        self.recover_history = partial(service.history_choice.replace, recover=True)
        self.start_fresh_history = partial(service.history_choice.replace, recover=False)

    @property
    def drafted_ids(self) -> frozenset[int]:
        """The saved chats that have an unsent draft."""
        return self._drafts.drafted_ids


class ChatFilesDoor:
    """A chat to a Markdown or JSON file and back (the window's File menu, `kestrel export` and
    `kestrel import`), the chats to choose from, and whether the history is damaged (the CLI
    leaves that choice to the window). Every refusal comes with a Problem that says why."""

    def __init__(self, service: Service) -> None:
        self._service = service
        files = service.files
        self.export_conversation = files.export
        self.render = files.render
        self.import_conversation = files.import_
        self.import_file = files.import_file
        self.read_all = service.conversations.read_all
        self.get_conversation = service.conversations.get

    @property
    def history_damage(self) -> HistoryDamaged | None:
        return self._service.history_damage
