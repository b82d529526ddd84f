"""What goes with a quick question: the copied text (or the X11 selection) and a screenshot, as chips."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QClipboard, QGuiApplication
from PySide6.QtWidgets import QWidget

from app.core.attachments import AttachedImage
from app.ui.chat.attachment_chips import Chip, ChipState
from app.ui.chat.image_chips import ImageChip

# The copied text sent with a question is cut to this many characters: a whole copied page would
# fill the tiny window's context and wait long for its first word.
COPIED_KEPT = 6000
PREVIEW_WORDS = 60  # more than fit: the chip's width cuts the preview
# The copied text's chip may take most of the window's width (the chat's chips share a row, 260 px each).
WIDE_CHIP = 540
# What the question asks when only the copied text goes with it.
ABOUT_COPIED = "Explain the copied text."


def copied_text(clipboard: QClipboard | None = None) -> str:
    """What the person has selected (X11's primary selection, where the system has one) or else
    copied, as text; "" when neither holds any words."""
    board = clipboard or QGuiApplication.clipboard()
    if board.supportsSelection():
        selected = board.text(QClipboard.Mode.Selection)
        if selected.strip():
            return selected
    return board.text(QClipboard.Mode.Clipboard)


def with_copied(question: str, copied: str) -> str:
    """The question as sent with the copied text after it, fenced so that it is read as text (a
    fence longer than any run of backticks in it) and cut to COPIED_KEPT characters (said so)."""
    kept = copied.strip()[:COPIED_KEPT]
    fence = "```"
    while fence in kept:
        fence += "`"
    cut = len(copied.strip()) > COPIED_KEPT
    note = f" (the first {COPIED_KEPT:,} of {len(copied.strip()):,} characters)" if cut else ""
    asked = question.strip() or ABOUT_COPIED
    return f"{asked}\n\nCopied text{note}:\n{fence}\n{kept}\n{fence}"


class CopiedTextChip(Chip):
    """"Ask about the copied text": a trimmed preview of it, and how much goes with the question
    when it is long. × takes it away (the question goes without it)."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__("the copied text", parent)
        self.setObjectName("copiedTextChip")
        self.kind = "copied"
        self.text = text
        self.state = ChipState.READY
        total = len(text.strip())
        how_much = (f" · first {COPIED_KEPT:,} of {total:,} characters" if total > COPIED_KEPT
                    else f" · {total:,} characters")
        # The preview is what gets cut: how much goes with the question is always said whole.
        metrics = self.label.fontMetrics()
        room = WIDE_CHIP - metrics.horizontalAdvance(f"Ask about the copied text: “”{how_much}")
        preview = metrics.elidedText(" ".join(text.split()[:PREVIEW_WORDS]), Qt.TextElideMode.ElideRight, max(60, room))
        self.remove_button.setToolTip("Remove the copied text: the question goes without it")
        self._show(f"Ask about the copied text: “{preview}”{how_much}",
                   f"Sent with your question{how_much.replace(' · ', ': ')}:\n{text.strip()[:400]}")

    def _show(self, text: str, tip: str) -> None:  # Override Chip: wider than a chat's chip, fitted already.
        super()._show(text, tip)
        self.label.setText(text)


class ScreenshotChip(ImageChip):
    """A screenshot, checked as a pasted image is; when the model cannot see images it says so and
    is not sent."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Screenshot", "Taken from your screen", parent)
        self.setObjectName("screenshotChip")

    def set_unseen(self, image: AttachedImage, reason: str) -> None:
        """The screenshot as checked, but the model answering cannot see it: red, with the reason."""
        self.set_read(image)
        self.image = None
        self.set_read(f"not sent: {reason}")
