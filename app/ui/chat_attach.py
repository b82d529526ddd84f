"""The window's side of documents in a chat: attaching (paperclip, drop, paste), sending with them, choosing collections."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QAction, QDragEnterEvent, QDragMoveEvent, QDropEvent
from PySide6.QtWidgets import QFileDialog, QWidget

from app.core.attachments import AttachedFile
from app.ui.adapter import ControllerAdapter
from app.ui.attachment_chips import AttachmentChip, local_files
from app.ui.chat_documents_calls import ChatDocumentsCalls
from app.ui.chat_files import documents_folder
from app.ui.composer import Composer

# The object name of View → Documents… (the Documents window), which "Manage documents…" triggers.
DOCUMENTS_ACTION = "showDocuments"


class ChatAttach(QObject):
    """Wires the composer's files and collections to the controller, through `calls`.

    Files dropped anywhere on `window` are attached (an event filter on it: the drop
    reaches the window when the part under the mouse does not take it). Each file is read
    off the UI thread; Send takes the files read, with or without text.
    """

    def __init__(self, window: QWidget, composer: Composer, adapter: ControllerAdapter,
                 calls: ChatDocumentsCalls | None = None) -> None:
        super().__init__(window)
        self._window, self._composer, self._adapter = window, composer, adapter
        self.calls = calls if calls is not None else ChatDocumentsCalls(adapter.controller)
        # The files attached in other chats, waiting for those chats' next messages (None: the new chat).
        self._waiting: dict[int | None, list[AttachmentChip]] = {}
        self._chat_id: int | None = None
        # Where the paperclip's dialog opens: the folder files were last attached from, at first
        # the user's Documents folder (a dialog given none opens in the working folder).
        self._folder = ""
        composer.collections = lambda: (self.calls.collections(), self.calls.chosen())
        composer.attachRequested.connect(self.choose_files)
        composer.filesOffered.connect(self.attach)
        composer.collectionsChosen.connect(self._choose_collections)
        composer.manageDocumentsRequested.connect(self._manage_documents)
        window.setAcceptDrops(True)
        window.installEventFilter(self)

    def attach(self, paths: Sequence[Path]) -> None:
        """Chips for these files, each read by the controller's reader (a task per file)."""
        if paths:
            self._composer.tray.attach(list(paths), self.calls.read, self._adapter.spawn)

    def choose_files(self) -> None:
        """The paperclip: a file dialog for one file or several."""
        paths, _ = QFileDialog.getOpenFileNames(self._window, "Attach files", self._folder or documents_folder(make=False),
                                                "Documents (*.pdf *.docx *.md *.markdown *.txt *.html *.htm);;"
                                                "All files (*)")
        if paths:
            self._folder = str(Path(paths[0]).parent)
            self.attach([Path(path) for path in paths])
            self._composer.edit.setFocus()  # the question comes next

    def send(self, text: str) -> bool:
        """Send the text with the files read so far; the chips go once the controller took it."""
        files: tuple[AttachedFile, ...] = self._composer.tray.ready()
        if not self.calls.send(text, files):
            return False
        self._composer.tray.clear()
        return True

    def chat_opened(self) -> None:
        """Another chat is open: the files waiting for a message stay with the chat they were
        attached in (as its draft does) and that chat's come back; the Documents button counts
        its collections. The new chat saved before its first message keeps what it had."""
        conversation = self._adapter.controller.conversation
        chat_id = conversation.id if conversation is not None else None
        if chat_id != self._chat_id:
            just_saved = self._chat_id is None and chat_id is not None and not self._adapter.controller.messages
            if not just_saved:
                if taken := self._composer.tray.take():
                    self._waiting[self._chat_id] = taken
                self._composer.tray.put(self._waiting.pop(chat_id, []))
            self._chat_id = chat_id
        self._composer.set_chosen_count(len(self.calls.chosen()))

    def _choose_collections(self, names: tuple[str, ...]) -> None:
        async def choose() -> None:
            await self.calls.choose(names)
            self.chat_opened()

        self._adapter.spawn(choose())

    def _manage_documents(self) -> None:
        action = self._window.findChild(QAction, DOCUMENTS_ACTION)
        if action is not None:
            action.trigger()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Override: files dropped on the window.
        if isinstance(event, (QDragEnterEvent, QDragMoveEvent)) and local_files(event.mimeData()):
            event.acceptProposedAction()
            return True
        if isinstance(event, QDropEvent) and event.type() == QEvent.Type.Drop and local_files(event.mimeData()):
            self.attach(local_files(event.mimeData()))
            event.acceptProposedAction()
            return True
        return super().eventFilter(watched, event)
