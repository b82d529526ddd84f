"""The documents and images parts of the window as scenes to look at and clip-test: chips in the composer, on
messages, a source, a message's images and the image viewer."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QWidget

from app.core.attachments import AttachedFile, AttachedImage, AttachedSection, SourceRef
from app.core.conversation import Message, MessageState, Role


PDF = AttachedFile("/home/ann/Quarterly report 2026 (final, signed).pdf", "pdf", 48_000,
                   tuple(AttachedSection(f"Page {n} text.", page=n) for n in range(1, 13)))
NOTES = AttachedFile("/home/ann/notes.md", "markdown", 4_000, (AttachedSection("Notes."),))
SOURCES = (SourceRef(1, PDF.path, 12, "Results › Revenue", "Revenue grew 12% in the third quarter, "
                     "driven by the new subscription plans. " * 6),
           SourceRef(2, NOTES.path, None, None, "Call Bob on Monday about the launch."),
           SourceRef(3, "/srv/manuals/installation-guide.pdf", 3, "Setup", "Run the installer as an administrator."))


def photo() -> AttachedImage:
    """A checked image as the check leaves one: scaled down, with a note."""
    from tests.helpers.vision_controller import png_image

    return AttachedImage("Harbour at dusk, from the lighthouse.jpg", "image/png", 1536, 1024, png_image(1536, 1024),
                         "Scaled down from 4032 x 2688.")


def composer_with_chips() -> QWidget:
    """A composer with a file being read, one read, one refused, and two collections chosen; an
    image checked (its thumbnail), one being checked, one refused; the image button greyed."""
    from app.ui.chat.attachment_chips import AttachmentChip, Chip
    from app.ui.chat.composer import Composer
    from app.ui.chat.image_chips import ImageChip
    from app.ui.common.theme import part_styles

    composer = Composer()
    composer.set_chosen_count(2)
    composer.edit.setPlainText("What changed since the last quarter?")
    tray = composer.tray
    composer.set_vision(False, "Qwen3 8B cannot see images: it has no vision projector. Choose a model tagged "
                               "Vision, such as Gemma 3 4B (Get a model).")
    chips: list[tuple[Chip, object]] = [
        (AttachmentChip(Path("/home/ann/slides.docx"), tray), None), (AttachmentChip(Path(PDF.path), tray), PDF),
        (AttachmentChip(Path("/home/ann/song.mp3"), tray), "It is not a kind of file Kestrel reads (audio)"),
        (ImageChip(photo().name, "/home/ann/Pictures/" + photo().name, tray), photo()),
        (ImageChip("Pasted image", "Pasted from the clipboard", tray), None),
        (ImageChip("scan.png", "/home/ann/scan.png", tray), "scan.png cannot be used: it holds text, not a picture. "
                                                            "Leave it out, or open it in an image viewer and save it "
                                                            "again as PNG or JPEG, then attach that.")]
    for chip, result in chips:
        if result is not None:
            chip.set_read(result)
        tray.chips.append(chip)
        tray.layout().addWidget(chip)
    tray._changed()  # as a chip read says: Send takes the file read
    dark = composer.palette().color(QPalette.ColorRole.Base).lightnessF() < 0.5
    composer.frame.setStyleSheet(part_styles(dark)["composerFrame"])  # as the window's theme sets it
    composer.setFixedWidth(720)
    composer.adjustSize()
    return composer


def chat_with_documents() -> QWidget:
    """A user's message with two files and an answer with three numbered sources."""
    from app.ui.state.message_model import MessageListModel
    from app.ui.messages.message_view import MessageView

    model = MessageListModel()
    model.reset_to([Message(1, 1, Role.USER, "Summarise these, please.", 0.0, MessageState.COMPLETE, None,
                            attachments=(PDF, NOTES)),
                    Message(2, 1, Role.ASSISTANT, "Revenue grew 12% [1]; call Bob on Monday [2]. Install as an "
                            "administrator [3].", 0.0, MessageState.COMPLETE, None, sources=SOURCES)])
    view = MessageView()
    view.setModel(model)
    view.resize(760, 420)
    view._keep_model = model  # type: ignore[attr-defined]  # the view does not own it
    return view


def message_with_images() -> QWidget:
    """A user's message with two images (a wide one and a tall one) and its answer."""
    from app.ui.state.message_model import MessageListModel
    from app.ui.messages.message_view import MessageView
    from tests.helpers.vision_controller import png_image

    tall = AttachedImage("receipt.png", "image/png", 300, 900, png_image(300, 900, "#2e7d32"))
    model = MessageListModel()
    model.reset_to([Message(1, 1, Role.USER, "What is in these two pictures?", 0.0, MessageState.COMPLETE, None,
                            images=(photo(), tall)),
                    Message(2, 1, Role.ASSISTANT, "A harbour at dusk, and a shop's receipt.", 0.0,
                            MessageState.COMPLETE, None)])
    view = MessageView()
    view.setModel(model)
    view.resize(760, 520)
    view._keep_model = model  # type: ignore[attr-defined]  # the view does not own it
    return view


def image_viewer(parent: QWidget | None = None) -> QWidget:
    """The viewer of a message's image, after a save that could not be written."""
    from app.ui.messages.image_viewer import ImageViewer

    viewer = ImageViewer(photo(), lambda coroutine: coroutine.close(), parent)
    viewer._say("The image could not be saved to /media/usb/Harbour at dusk, from the lighthouse.png: "
                "Read-only file system. Choose another folder.")
    return viewer


def source_popup(parent: QWidget | None = None) -> QWidget:
    from app.ui.messages.source_popup import SourcePopup

    return SourcePopup(SOURCES[0], parent)
