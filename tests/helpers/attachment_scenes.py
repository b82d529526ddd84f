"""The documents parts of the window as scenes to look at and clip-test: chips in the composer, on messages, a source."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QWidget

from app.core.attachments import AttachedFile, AttachedSection, SourceRef
from app.core.conversation import Message, MessageState, Role
from tests.helpers import vision_standins  # noqa: F401  # before app.ui: the image core's names, until merged

PDF = AttachedFile("/home/ann/Quarterly report 2026 (final, signed).pdf", "pdf", 48_000,
                   tuple(AttachedSection(f"Page {n} text.", page=n) for n in range(1, 13)))
NOTES = AttachedFile("/home/ann/notes.md", "markdown", 4_000, (AttachedSection("Notes."),))
SOURCES = (SourceRef(1, PDF.path, 12, "Results › Revenue", "Revenue grew 12% in the third quarter, "
                     "driven by the new subscription plans. " * 6),
           SourceRef(2, NOTES.path, None, None, "Call Bob on Monday about the launch."),
           SourceRef(3, "/srv/manuals/installation-guide.pdf", 3, "Setup", "Run the installer as an administrator."))


def composer_with_chips() -> QWidget:
    """A composer with a file being read, one read, one refused, and two collections chosen."""
    from app.ui.attachment_chips import AttachmentChip
    from app.ui.composer import Composer
    from app.ui.theme import part_styles

    composer = Composer()
    composer.set_chosen_count(2)
    composer.edit.setPlainText("What changed since the last quarter?")
    tray = composer.tray
    for path, result in ((Path("/home/ann/slides.docx"), None), (Path(PDF.path), PDF),
                         (Path("/home/ann/song.mp3"), "It is not a kind of file Kestrel reads (audio)")):
        chip = AttachmentChip(path, tray)
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
    from app.ui.message_model import MessageListModel
    from app.ui.message_view import MessageView

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


def source_popup(parent: QWidget | None = None) -> QWidget:
    from app.ui.source_popup import SourcePopup

    return SourcePopup(SOURCES[0], parent)
