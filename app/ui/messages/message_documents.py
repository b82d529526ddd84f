"""Under a message: the images and files attached to a user's message, the numbered Sources under an answer."""

from __future__ import annotations

import html
import re

from PySide6.QtCore import QPoint, QRect, QRectF, Qt
from PySide6.QtGui import QFont, QFontMetrics, QPainter, QPalette

from app.core.attachments import SourceRef
from app.core.conversation import Message, Role
from app.ui.messages.message_actions import COPIED_TIP, TIPS
from app.ui.messages.message_images import MessageImages
from app.ui.messages.message_layout import DOCUMENTS_GAP
from app.ui.state.message_words import attachment_label, source_label

GAP = DOCUMENTS_GAP  # between the text (or bubble) and the chips, and between chips
PAD_X = 8
PAD_Y = 3
RADIUS = 8
SOURCES = "Sources"
# A chip is never wider than this share of the column: a long file name is elided.
_WIDEST = 0.9
_LABELS_KEPT = 2_000
SOURCE_SCHEME = "kestrel-source"
# Where a citation may not become a link: inside a tag, code, a link already, the style sheet.
_KEEP = re.compile(r"(<pre.*?</pre>|<code.*?</code>|<a\b.*?</a>|<style.*?</style>|<[^>]*>)", re.DOTALL | re.IGNORECASE)
_CITATION = re.compile(r"\[(\d{1,3})\]")


def labels(message: Message) -> list[str]:
    """The chips a message shows: its attachments (user) or its sources (answer)."""
    if message.role == Role.USER:
        return [attachment_label(file) for file in message.attachments]
    return [source_label(source) for source in message.sources]


def link_citations(rendered: str, sources: tuple[SourceRef, ...]) -> str:
    """An answer's HTML with each "[n]" that names one of its sources made a link that opens it."""
    numbers = {source.number for source in sources}
    if not numbers:
        return rendered

    def link(found: re.Match[str]) -> str:
        number = int(found.group(1))
        return f'<a href="{SOURCE_SCHEME}:{number}">[{number}]</a>' if number in numbers else found.group(0)

    return "".join(part if _KEEP.fullmatch(part) else _CITATION.sub(link, part) for part in _KEEP.split(rendered))


def source_from_href(href: str, sources: tuple[SourceRef, ...]) -> SourceRef | None:
    """The source a citation link names, or None (another link, or a number not among them)."""
    if not href.startswith(SOURCE_SCHEME + ":"):
        return None
    number = href[len(SOURCE_SCHEME) + 1:]
    return next((source for source in sources if str(source.number) == number), None)


def tooltip(message: Message, chip: int) -> str:
    """Rich text for a chip's tooltip: where the file is (and what the reader noted, or the heading)."""
    if message.role == Role.USER:
        file = message.attachments[chip]
        note = f"<br>{html.escape(file.note)}" if file.note else ""
        return f"<qt>{html.escape(file.path)}{note}<br>Attached: its text is kept with the chat.</qt>"
    source = message.sources[chip]
    heading = f"<br>{html.escape(source.heading)}" if source.heading else ""
    return f"<qt>{html.escape(source.path)}{heading}<br>Click to read the passage the answer was given.</qt>"


class MessageDocuments:
    """Where a message's chips go and how they are painted; one font (the small one), set by the
    delegate. A user's images (`images`) come first, their thumbnails above the chips."""

    def __init__(self, font: QFont) -> None:
        self.images = MessageImages()
        # (message id, its files', its sources' tuples) -> its chips' labels: a PDF's page count reads every
        # section (1.3 ms for five 2,000-page files), and hovering asks on each mouse move.
        self._labels: dict[tuple[int, int, int], list[str]] = {}
        self.set_font(font)

    def forget(self) -> None:
        """Another chat is open: its messages' chips are not these."""
        self._labels.clear()

    def set_font(self, font: QFont) -> None:
        self.font = QFont(font)
        self._metrics = QFontMetrics(self.font)
        self.chip_height = self._metrics.height() + 2 * PAD_Y

    def _width(self, label: str, limit: int) -> int:
        return min(self._metrics.horizontalAdvance(label) + 2 * PAD_X + 1, limit)

    def chips(self, message: Message, area: QRect) -> list[tuple[str, QRect]]:
        """Each chip's label and rect in area (its top and width: the column), laid out in lines.

        A user's chips sit at the right, under the bubble; an answer's start after "Sources".
        """
        if not message.attachments and not message.sources:
            return []
        key = (message.id, id(message.attachments), id(message.sources))
        names = self._labels.get(key)
        if names is None:
            if len(self._labels) > _LABELS_KEPT:
                self._labels.clear()
            names = self._labels[key] = labels(message)
        limit = max(40, int(area.width() * _WIDEST))
        user = message.role == Role.USER
        below = area.top() + self.images.height(message, area.width())
        start = 0 if user else self._metrics.horizontalAdvance(SOURCES) + GAP
        lines: list[list[tuple[str, int]]] = [[]]
        used = start
        for name in names:
            width = self._width(name, limit)
            if lines[-1] and used + width > area.width():
                lines.append([])
                used = 0
            lines[-1].append((name, width))
            used += width + GAP
        placed = []
        for number, line in enumerate(lines):
            top = below + number * (self.chip_height + GAP)
            total = sum(width for _, width in line) + GAP * (len(line) - 1)
            x = area.right() + 1 - total if user else area.left() + (start if number == 0 else 0)
            for name, width in line:
                placed.append((name, QRect(x, top, width, self.chip_height)))
                x += width + GAP
        return placed

    def height(self, message: Message, width: int) -> int:
        """The images' and chips' height under the message's text, the gap above them included (0: none)."""
        placed = self.chips(message, QRect(0, 0, width, 0))
        return placed[-1][1].bottom() + 1 + GAP if placed else self.images.height(message, width)

    def image_at(self, message: Message, area: QRect, point: QPoint) -> int | None:
        """Which of a user's images (its position) has its thumbnail under a point."""
        return self.images.image_at(message, area, point)

    def chip_at(self, message: Message, area: QRect, point: QPoint) -> int | None:
        """Which chip (its position in the message's attachments or sources) is under a point."""
        for number, (_, rect) in enumerate(self.chips(message, area)):
            if rect.contains(point):
                return number
        return None

    def paint(self, painter: QPainter, message: Message, area: QRect, palette: QPalette) -> None:
        self.images.paint(painter, message, area, palette)
        placed = self.chips(message, area)
        if not placed:
            return
        painter.save()
        painter.setFont(self.font)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        text = palette.color(QPalette.ColorRole.Text)
        if message.role != Role.USER:
            painter.setPen(palette.color(QPalette.ColorRole.PlaceholderText))
            painter.drawText(QRect(area.left(), area.top(), area.width(), self.chip_height),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, SOURCES)
        for label, rect in placed:
            painter.setPen(palette.color(QPalette.ColorRole.Mid))
            painter.setBrush(palette.color(QPalette.ColorRole.AlternateBase))
            painter.drawRoundedRect(QRectF(rect).adjusted(0.5, 0.5, -0.5, -0.5), RADIUS, RADIUS)
            painter.setPen(text)
            inner = rect.adjusted(PAD_X, 0, -PAD_X, 0)
            shown = self._metrics.elidedText(label, Qt.TextElideMode.ElideMiddle, inner.width())
            painter.drawText(inner, Qt.AlignmentFlag.AlignCenter, shown)
        painter.restore()


def row_tooltip(message: Message, action: str | None, copied: bool, chip: int | None) -> str:
    """A message row's tooltip at a point: its action's, its chip's, or (on an answer) why the
    model's own chat template was not used; "" for none."""
    if action is not None:
        return COPIED_TIP if copied and action == "copy" else TIPS[action]
    if chip is not None:
        return tooltip(message, chip)
    note = message.stats.template_note if message.stats is not None else ""
    # Rich text, so that Qt wraps a long reason instead of one screen-wide line.
    return f"<qt>{html.escape(note)}</qt>" if note else ""
