"""Export the open chat (Markdown or JSON) and import a JSON export back, from the File menu."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtWidgets import QWidget

from app.service.chats.chat_files import ExportOutcome
from app.ui.common.save_files import OpenAsker, SaveAsker, ask_open, ask_save, documents_folder, file_name_for

if TYPE_CHECKING:
    from app.service.doors.chat import ChatDoor
    from app.service.doors.history import ChatFilesDoor
    from app.ui.state.adapter import ServiceAdapter

_SUFFIX = {"markdown": ".md", "json": ".json"}
_FILTER = {"markdown": "Markdown (*.md)", "json": "Kestrel chat (*.json)"}

class ChatFiles:
    """Asks where, then lets the service write or read the file off the UI thread.

    `ask_save` and `ask_open` are the file dialogs (tests give their own).
    """

    def __init__(self, adapter: "ServiceAdapter", chat: "ChatDoor", files: "ChatFilesDoor", parent: QWidget,
                 ask_save: SaveAsker = ask_save, ask_open: OpenAsker = ask_open) -> None:
        self.adapter = adapter
        self._chat, self._files = chat, files
        self.parent = parent
        self.ask_save = ask_save
        self.ask_open = ask_open
        self.folder = ""  # the folder last used; the Documents folder until then
        self.on_exported: Callable[[Path], None] | None = None  # told the path of each file written

    def choose_export(self, fmt: str) -> None:
        """Ask where, then write there: over a file there only when the dialog asked the user
        whether to replace it. A name the dialog let through without a suffix gets one here,
        and then a file of that name is not replaced (nobody was asked about it)."""
        conversation = self._chat.conversation
        if conversation is None:
            return  # the actions are disabled for a chat not saved yet
        suggested = str(Path(self.folder or documents_folder()) / file_name_for(conversation.title, fmt))
        path = self.ask_save(self.parent, "Export this chat", suggested, _FILTER[fmt])
        if path:
            asked = bool(Path(path).suffix)
            if not asked:
                path += _SUFFIX[fmt]
            self.folder = str(Path(path).parent)
            self.adapter.spawn(self._export(conversation.id, Path(path), fmt, asked))

    async def _export(self, conversation_id: int, path: Path, fmt: str, replace: bool) -> None:
        # Only a file written is confirmed: a refusal was said by the service (a Problem).
        written = await self._files.export_conversation(conversation_id, path, fmt, replace=replace)
        if written is ExportOutcome.WRITTEN and self.on_exported is not None:
            self.on_exported(path)

    def choose_import(self) -> None:
        path = self.ask_open(self.parent, "Import a chat", self.folder or documents_folder(make=False),
                             "Kestrel chat (*.json);;All files (*)")
        if path:
            self.folder = str(Path(path).parent)
            self.adapter.spawn(self._import(Path(path)))

    async def _import(self, path: Path) -> None:
        conversation_id = await self._files.import_conversation(path)
        if conversation_id is not None:
            await self._chat.open_conversation(conversation_id)
