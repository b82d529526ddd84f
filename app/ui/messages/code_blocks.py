"""Code blocks as the person chose (View → Wrap long code lines): long lines wrap inside the
block, or keep their lines and scroll sideways inside it; either way nothing passes the column.

markdown.py renders a code block as a two-row table (the header, then the lines in <pre>);
Qt widens such a table to its longest line, past the reading column. `shape_code` fixes
that on the laid-out document: wrapped lines get a hanging indent (a continuation is
never mistaken for an indented line of its own); kept lines get a right margin so large
that the table keeps the column's width while each line runs on, and the painting
(`draw_document`) shows them through the block's window, shifted by its offset.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRect, QRectF, Qt
from PySide6.QtGui import (QAbstractTextDocumentLayout, QColor, QFontMetricsF, QLinearGradient, QPainter, QRegion,
                           QTextBlockFormat, QTextCursor, QTextDocument, QTextFrame, QTextTable)

from app.ui.messages.markdown import COPY_SCHEME

# A kept line's right margin: Qt sizes the table without it, and the line runs on past the cell.
_KEEP_LINES = -1_000_000.0
_HANG = "  "  # a wrapped line's continuation starts this much further in (monospace spaces)
WRAP_MARK = "\u21aa"  # painted in that indent: this line goes on from the one above
_FADE = 28.0  # the fade at a scrolled block's cut edges
BAR = 3.0  # the height of the small scrollbar in a wide block's bottom padding
STEP = 48.0  # one key press or wheel notch, in pixels


def is_code_table(table: QTextTable) -> bool:
    """Whether a table is one of markdown.py's code blocks: two rows, the copy link in its header."""
    if table.rows() != 2 or table.columns() != 2:
        return False
    header = table.cellAt(0, 1)
    if not header.isValid():
        return False
    block = header.firstCursorPosition().block()
    fragments = block.begin()
    while not fragments.atEnd():
        if fragments.fragment().charFormat().anchorHref().startswith(COPY_SCHEME + ":"):
            return True
        fragments += 1
    return False


def code_tables(document: QTextDocument) -> list[QTextTable]:
    """The document's code blocks, top to bottom (a list item's or a quote's too)."""
    found: list[QTextTable] = []

    def walk(frame: QTextFrame) -> None:
        for child in frame.childFrames():
            if isinstance(child, QTextTable) and is_code_table(child):
                found.append(child)
            walk(child)

    walk(document.rootFrame())
    return found


def shape_code(document: QTextDocument, wrap: bool) -> None:
    """Make the document's code blocks wrap their lines, or keep them (before it is laid out)."""
    for table in code_tables(document):
        cell = table.cellAt(1, 0)
        cursor = cell.firstCursorPosition()
        font = cursor.charFormat().font()
        cursor.setPosition(cell.lastCursorPosition().position(), QTextCursor.MoveMode.KeepAnchor)
        form = QTextBlockFormat()
        if wrap:
            hang = QFontMetricsF(font).horizontalAdvance(_HANG)
            form.setNonBreakableLines(False)
            form.setLeftMargin(hang)
            form.setTextIndent(-hang)
        else:
            form.setRightMargin(_KEEP_LINES)
        cursor.mergeBlockFormat(form)


@dataclass(frozen=True)
class CodeStrip:
    """Where a code block's lines show in its document (`window`), the block's lines row with
    its padding (`row`), the widest line, and the block's background."""

    window: QRectF
    row: QRectF
    width: float
    background: QColor

    @property
    def overflow(self) -> float:
        """How far the lines may scroll: the widest line's width past the window."""
        return max(0.0, self.width - self.window.width())


def code_strips(document: QTextDocument) -> list[CodeStrip]:
    """The document's code blocks as laid out (it must be)."""
    layout = document.documentLayout()
    strips = []
    for table in code_tables(document):
        cell = table.cellAt(1, 0)
        padding = cell.format().toTableCellFormat()
        first, last = cell.firstCursorPosition().block(), cell.lastCursorPosition().block()
        right = layout.blockBoundingRect(table.cellAt(0, 1).firstCursorPosition().block()).right()
        top, left = layout.blockBoundingRect(first).top(), layout.blockBoundingRect(first).left()
        bottom = layout.blockBoundingRect(last).bottom()
        widest, block = 0.0, first
        while block.isValid():
            lines = block.layout()
            for number in range(lines.lineCount()):
                widest = max(widest, lines.lineAt(number).naturalTextWidth())
            if block == last:
                break
            block = block.next()
        window = QRectF(left, top, max(1.0, right - left), bottom - top)
        row = window.adjusted(-padding.leftPadding(), -padding.topPadding(), padding.rightPadding(),
                              padding.bottomPadding())
        strips.append(CodeStrip(window, row, widest, table.format().background().color()))
    return strips


def clamp(strip: CodeStrip, offset: float) -> float:
    """An offset the strip can show: from its start to where its widest line ends."""
    return max(0.0, min(strip.overflow, offset))


def draw_document(painter: QPainter, document: QTextDocument, visible: QRectF, strips: list[CodeStrip],
                  offsets: Mapping[int, float], context: QAbstractTextDocumentLayout.PaintContext | None = None,
                  ink: QColor | None = None) -> None:
    """Paint the part of the document in `visible`, each wide code block's lines shifted by its
    offset (by number in `strips`) and cut at its window; `ink` draws the cues (fade, bar)."""
    context = context if context is not None else QAbstractTextDocumentLayout.PaintContext()
    layout = document.documentLayout()
    wide = [(number, strip) for number, strip in enumerate(strips) if strip.overflow > 0
            and strip.row.intersects(visible)]
    outside = QRegion(visible.toAlignedRect())
    for _number, strip in wide:
        cut = _cut(strip)  # and everything right of it: the lines run on past the block
        outside -= QRegion(cut.adjusted(0, 0, 1 << 20, 0))
    painter.save()
    painter.setClipRegion(outside, Qt.ClipOperation.IntersectClip)
    context.clip = visible
    layout.draw(painter, context)
    painter.restore()
    for number, strip in wide:
        offset = clamp(strip, offsets.get(number, 0.0))
        shown = QRectF(_cut(strip)).intersected(visible)
        if shown.isEmpty():
            continue
        painter.save()
        painter.setClipRect(shown, Qt.ClipOperation.IntersectClip)
        painter.fillRect(shown, strip.background)
        painter.translate(-offset, 0)
        context.clip = shown.translated(offset, 0)
        layout.draw(painter, context)
        painter.restore()
        if ink is not None:
            _cues(painter, strip, offset, ink)


def _cut(strip: CodeStrip) -> QRect:
    """Where a wide block's lines paint: its window, and its right padding (the fade's room)."""
    return QRectF(strip.window.left(), strip.window.top(), strip.row.right() - strip.window.left(),
                  strip.window.height()).toAlignedRect()


def _cues(painter: QPainter, strip: CodeStrip, offset: float, ink: QColor) -> None:
    """A fade where lines are cut, and a small bar that says how far along the block is scrolled."""
    window, row = strip.window, strip.row
    painter.save()
    clear = QColor(strip.background)
    clear.setAlpha(0)
    if offset < strip.overflow:
        fade = QRectF(row.right() - _FADE, window.top(), _FADE, window.height())
        gradient = QLinearGradient(fade.topLeft(), fade.topRight())
        gradient.setColorAt(0, clear)
        gradient.setColorAt(1, strip.background)
        painter.fillRect(fade, gradient)
    if offset > 0:
        fade = QRectF(row.left(), window.top(), _FADE, window.height())
        gradient = QLinearGradient(fade.topRight(), fade.topLeft())
        gradient.setColorAt(0, clear)
        gradient.setColorAt(1, strip.background)
        painter.fillRect(fade, gradient)
    track, thumb = bar_rects(strip, offset)
    faint = QColor(ink)
    faint.setAlphaF(0.15)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setBrush(faint)
    painter.drawRoundedRect(track, BAR / 2, BAR / 2)
    strong = QColor(ink)
    strong.setAlphaF(0.55)
    painter.setBrush(strong)
    painter.drawRoundedRect(thumb, BAR / 2, BAR / 2)
    painter.restore()


def bar_rects(strip: CodeStrip, offset: float) -> tuple[QRectF, QRectF]:
    """A wide block's scrollbar: its track (in the bottom padding) and its thumb at `offset`."""
    window = strip.window
    track = QRectF(window.left(), strip.row.bottom() - BAR - 2, window.width(), BAR)
    length = max(24.0, track.width() * window.width() / max(1.0, strip.width))
    share = clamp(strip, offset) / strip.overflow if strip.overflow else 0.0
    return track, QRectF(track.left() + (track.width() - length) * share, track.top(), length, BAR)


def offset_for_bar(strip: CodeStrip, x: float) -> float:
    """The offset that puts the bar's thumb centred at x (document coordinates)."""
    track, thumb = bar_rects(strip, 0.0)
    room = track.width() - thumb.width()
    share = (x - track.left() - thumb.width() / 2) / room if room > 0 else 0.0
    return clamp(strip, share * strip.overflow)


def wrap_marks(document: QTextDocument) -> list[QPointF]:
    """Where a wrapped code line goes on (document coordinates: the baseline's left, in its indent)."""
    marks: list[QPointF] = []
    layout = document.documentLayout()
    for table in code_tables(document):
        cell = table.cellAt(1, 0)
        block, last = cell.firstCursorPosition().block(), cell.lastCursorPosition().block()
        while block.isValid():
            lines = block.layout()
            if lines.lineCount() > 1:
                origin = layout.blockBoundingRect(block).topLeft()
                left = origin.x() + block.blockFormat().leftMargin() + block.blockFormat().textIndent()
                for number in range(1, lines.lineCount()):
                    line = lines.lineAt(number)
                    marks.append(QPointF(left, origin.y() + line.y() + line.ascent()))
            if block == last:
                break
            block = block.next()
    return marks


def draw_wrap_marks(painter: QPainter, marks: list[QPointF], visible: QRectF, ink: QColor) -> None:
    """The wrap mark at each continued code line that meets `visible` (in the painter's font)."""
    shown = [mark for mark in marks if visible.top() - 20 <= mark.y() <= visible.bottom() + 20]
    if not shown:
        return
    painter.save()
    faint = QColor(ink)
    faint.setAlphaF(0.6)
    painter.setPen(faint)
    for mark in shown:
        painter.drawText(mark, WRAP_MARK)
    painter.restore()
