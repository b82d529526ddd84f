"""The window's side of files and images in a chat: attaching (paperclip, Add image, drop, paste), sending with
them, choosing collections."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QObject, Signal
from PySide6.QtGui import QAction, QDragEnterEvent, QDragMoveEvent, QDropEvent, QImage
from PySide6.QtWidgets import QFileDialog, QWidget

from app.core.attachments import IMAGE_SUFFIXES, MAX_IMAGES, AttachedFile, AttachedImage, is_image_path
from app.documents.readers import file_patterns
from app.service.doors.attach import AttachDoor
from app.service.doors.chat import ChatDoor
from app.ui.chat.attachment_chips import Chip, local_files
from app.ui.chat.chat_documents_calls import ChatDocumentsCalls
from app.ui.common.save_files import documents_folder
from app.ui.chat.chat_images_calls import ChatImagesCalls
from app.ui.chat.composer import Composer
from app.ui.chat.image_chips import ImageChip, pasted_image, png_bytes

# The object name of View → Documents… (the Documents window), which "Manage documents…" triggers.
DOCUMENTS_ACTION = "showDocuments"
_IMAGES = " ".join(f"*{suffix}" for suffix in IMAGE_SUFFIXES)
PASTED = "Pasted image"
HERE = "Message Kestrel"  # the composer's own placeholder: this PC answers


def composer_placeholder(answers_from: str | None) -> str:
    """The empty composer says where a message will go before the person writes it (short: it is one line)."""
    return HERE if answers_from is None else f"Answers come from {answers_from}"


class ChatAttach(QObject):
    """Wires the composer's files, images and collections to the service: through `attach`
    (AttachDoor), its files read by `calls` and its images checked by `images` (each says a
    refusal in a chip's words), and Send through `chat` (ChatDoor).

    Files dropped anywhere on `window` are attached (an event filter on it: the drop
    reaches the window when the part under the mouse does not take it); image files (by
    their suffix) and image data pasted or dropped become image chips. Each is read or
    checked off the UI thread; Send takes those read, with or without text. While the open
    chat's model cannot see images, an image offered is refused in place with the reason.
    Signal: sent (the message was taken: the box and the chips are cleared).
    """

    sent = Signal()

    def __init__(self, window: QWidget, composer: Composer, chat: ChatDoor, attach: AttachDoor,
                 spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]]) -> None:
        super().__init__(window)
        self._window, self._composer, self._chat, self._attach = window, composer, chat, attach
        self._spawn = spawn
        self.calls = ChatDocumentsCalls(attach)
        self.images = ChatImagesCalls(attach)
        # The files attached in other chats, waiting for those chats' next messages (None: the new chat).
        self._waiting: dict[int | None, list[Chip]] = {}
        self._chat_id: int | None = None
        # Where the paperclip's dialog opens: the folder files were last attached from, at first
        # the user's Documents folder (a dialog given none opens in the working folder).
        self._folder = ""
        composer.collections = lambda: (attach.collection_names(), attach.chat_collections())
        composer.attachRequested.connect(self.choose_files)
        composer.filesOffered.connect(self.attach)
        composer.imageRequested.connect(self.choose_images)
        composer.imageOffered.connect(self.attach_image_data)
        composer.collectionsChosen.connect(self._choose_collections)
        composer.manageDocumentsRequested.connect(self._manage_documents)
        window.setAcceptDrops(True)
        window.installEventFilter(self)

    def attach(self, paths: Sequence[Path]) -> None:
        """Chips for these files, each read by the document reader (a task per file); image
        files are checked by the image check instead (a task per image)."""
        files = [path for path in paths if not is_image_path(path)]
        if files:
            self._composer.tray.attach(files, self.calls.read, self._spawn)
        for path in paths:
            if is_image_path(path) and not any(isinstance(chip, ImageChip) and chip.where == str(path)
                                               for chip in self._composer.tray.chips):
                self._add_image(path.name, str(path), partial(self.images.read, path))

    def attach_image_data(self, payload: bytes | QImage) -> None:
        """An image pasted or dropped as data (not a file): encoded to PNG off the UI thread if
        it came as a picture, then checked like a file."""
        async def check() -> AttachedImage | str:
            data = payload if isinstance(payload, bytes) else await asyncio.to_thread(png_bytes, payload)
            return await self.images.read_pasted(data, PASTED)

        self._add_image(PASTED, "Pasted from the clipboard", check)

    def _add_image(self, name: str, where: str, check: Callable[[], Awaitable[AttachedImage | str]]) -> None:
        tray = self._composer.tray
        chip = ImageChip(name, where, tray)
        refusal = self._image_refusal()
        if refusal:
            chip.set_read(refusal)
        tray.add(chip, None if refusal else check(), self._spawn)

    def _image_refusal(self) -> str:
        """Why an image offered now cannot go with the next message ("" when it can)."""
        vision = self._attach.vision()
        if not vision.available:
            return vision.reason or "The chat's model cannot see images: choose one that can"
        if self._composer.tray.image_count() >= MAX_IMAGES:
            return f"A message takes at most {MAX_IMAGES} images: send these first, or remove one"
        return ""

    def refresh_vision(self) -> None:
        """Whether the open chat's model can see images, and where its messages go, asked again (a model
        chosen, loaded or added): the image button and the empty composer's words follow them."""
        vision = self._attach.vision()
        self._composer.set_vision(vision.available, vision.reason)
        self._composer.edit.setPlaceholderText(composer_placeholder(self._attach.answers_from()))

    def choose_files(self) -> None:
        """The paperclip: a file dialog for one file or several, documents or images."""
        documents = file_patterns()  # every registered reader's extensions, read when the dialog opens
        self._choose("Attach files", f"Images and documents ({_IMAGES} {documents});;Documents ({documents});;"
                                     f"Images ({_IMAGES});;All files (*)")

    def choose_images(self) -> None:
        """Add image: the file dialog for images alone."""
        self._choose("Add images", f"Images ({_IMAGES});;All files (*)")

    def _choose(self, caption: str, file_filter: str) -> None:
        # The filters name dozens of extensions: the dialog shows their names alone.
        paths, _ = QFileDialog.getOpenFileNames(self._window, caption, self._folder or documents_folder(make=False),
                                                file_filter, options=QFileDialog.Option.HideNameFilterDetails)
        if paths:
            self._folder = str(Path(paths[0]).parent)
            self.attach([Path(path) for path in paths])
            self._composer.edit.setFocus()  # the question comes next

    def send(self, text: str) -> bool:
        """Send the text with the files read and images checked so far; the box and the chips are
        cleared once the open chat took it (else they stay, and a Problem may say why)."""
        files: tuple[AttachedFile, ...] = self._composer.tray.ready()
        if not self._chat.send(text, files, self._composer.tray.images()):
            return False
        self._composer.tray.clear()
        self._composer.edit.clear()
        self.sent.emit()
        return True

    def chat_opened(self) -> None:
        """Another chat is open: the files waiting for a message stay with the chat they were
        attached in (as its draft does) and that chat's come back; the Documents button counts
        its collections. The new chat saved before its first message keeps what it had."""
        conversation = self._chat.conversation
        chat_id = conversation.id if conversation is not None else None
        if chat_id != self._chat_id:
            just_saved = self._chat_id is None and chat_id is not None and not self._chat.messages
            if not just_saved:
                if taken := self._composer.tray.take():
                    self._waiting[self._chat_id] = taken
                self._composer.tray.put(self._waiting.pop(chat_id, []))
            self._chat_id = chat_id
        self._composer.set_chosen_count(len(self._attach.chat_collections()))
        self.refresh_vision()

    def _choose_collections(self, names: tuple[str, ...]) -> None:
        async def choose() -> None:
            await self._attach.set_chat_collections(tuple(names))
            self.chat_opened()

        self._spawn(choose())

    def _manage_documents(self) -> None:
        action = self._window.findChild(QAction, DOCUMENTS_ACTION)
        if action is not None:
            action.trigger()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Override: files and images dropped on the window.
        if isinstance(event, (QDragEnterEvent, QDragMoveEvent)) and _carries(event):
            event.acceptProposedAction()
            return True
        if isinstance(event, QDropEvent) and event.type() == QEvent.Type.Drop and _carries(event):
            files = local_files(event.mimeData())
            image = None if files else pasted_image(event.mimeData())
            if files:
                self.attach(files)
            elif image is not None:
                self.attach_image_data(image)  # a picture dragged out of a web page or an image viewer
            event.acceptProposedAction()
            return True
        return super().eventFilter(watched, event)


def _carries(event: QDropEvent | QDragEnterEvent | QDragMoveEvent) -> bool:
    """Whether a drag brings files or an image (which the window takes)."""
    mime = event.mimeData()
    return bool(local_files(mime)) or mime.hasImage() or mime.hasFormat("image/png")
