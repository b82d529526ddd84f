"""A message's text laid out for painting: one document, or one per block while an answer grows."""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF
from PySide6.QtGui import QColor, QPainter, QTextDocument

from app.ui.messages.code_blocks import CodeStrip, code_strips, draw_document, draw_wrap_marks, wrap_marks

# A list item at the start of a line: "- ", "* ", "+ ", "1. ", "1) ".
_LIST_ITEM = re.compile(r"(?:[-*+]|\d{1,9}[.)])(?:\s|$)")


class BlockCutter:
    """Where a growing Markdown text can be cut into blocks that render alone as they do together.

    A cut comes after a blank line, outside a code fence, before a complete line that
    starts at column 0 and does not continue a list (list items apart from a blank line
    make one loose list, which renders differently from two lists). `cuts` are offsets
    into the text; each feed() reads only the lines added since the last one.
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.cuts: list[int] = []
        self._seen = ""  # the text up to the first line not read yet
        self._fence: str | None = None  # the fence that opened the code block we are in
        self._blank = False
        self._in_list = False

    def feed(self, text: str) -> list[int]:
        """The cuts in text, which is the text of the last call with more at its end."""
        if not text.startswith(self._seen):
            self._reset()  # Replaced, not extended: read it from the start.
        position = len(self._seen)
        while (end := text.find("\n", position)) >= 0:
            self._read(text[position:end], position)
            position = end + 1
        self._seen = text[:position]
        return self.cuts

    def _read(self, line: str, offset: int) -> None:
        stripped = line.strip()
        if self._fence is not None:
            if stripped.startswith(self._fence) and not stripped.strip(self._fence[0]):
                self._fence = None
            self._blank = False
            return
        if not stripped:
            self._blank = True
            return
        at_margin = not line[0].isspace()
        item = at_margin and _LIST_ITEM.match(line) is not None
        if at_margin and self._blank and offset > 0 and not (item and self._in_list):
            self.cuts.append(offset)
        if item:
            self._in_list = True
        elif at_margin and self._blank:
            self._in_list = False  # A line right after an item, with no blank, continues it.
        if stripped.startswith(("```", "~~~")):
            self._fence = stripped[: len(stripped) - len(stripped.lstrip(stripped[0]))]
        self._blank = False


@dataclass(frozen=True)
class CodeLayout:
    """A laid-out document's code blocks: their strips, and where wrapped lines go on."""

    width: float  # the width it was laid out at
    strips: list[CodeStrip]
    marks: list[QPointF]


# Kept per document while it lives: a growing answer makes a body each frame from the same documents.
_CODE: weakref.WeakKeyDictionary[QTextDocument, CodeLayout] = weakref.WeakKeyDictionary()


def code_layout(document: QTextDocument) -> CodeLayout:
    """The document's code blocks as laid out now."""
    known = _CODE.get(document)
    if known is None or known.width != document.textWidth():
        document.size()  # laid out: a block's lines exist only once it is
        known = _CODE[document] = CodeLayout(document.textWidth(), code_strips(document), wrap_marks(document))
    return known


class MessageBody:
    """Documents laid out at one width, stacked as one document would place its blocks.

    Its code blocks are numbered top to bottom across the documents: `offsets` (block
    number → pixels) says how far each wide one is scrolled sideways.
    """

    def __init__(self, documents: list[QTextDocument]) -> None:
        self.documents = documents
        self.tops: list[float] = []
        top = 0.0
        for number, document in enumerate(documents):
            if number:
                top += _gap(documents[number - 1], document)
            self.tops.append(top)
            top += document.size().height()
        self.height = top
        self.width = max((document.textWidth() for document in documents), default=0.0)

    def draw(self, painter: QPainter, visible: QRectF, offsets: Mapping[int, float] | None = None,
             ink: QColor | None = None) -> None:
        """Paint the documents that meet `visible` (in body coordinates), only those parts;
        `ink` draws the code blocks' cues (wrap marks, a wide block's fade and bar)."""
        offsets = offsets if offsets is not None else {}
        first = 0
        for top, document in zip(self.tops, self.documents):
            code = code_layout(document)
            bottom = top + document.size().height()
            if bottom >= visible.top() and top <= visible.bottom():
                painter.translate(0, top)
                here = visible.translated(0, -top)
                mine = {number - first: offset for number, offset in offsets.items()
                        if first <= number < first + len(code.strips)}
                draw_document(painter, document, here, code.strips, mine, ink=ink)
                if ink is not None:
                    draw_wrap_marks(painter, code.marks, here, ink)
                painter.translate(0, -top)
            first += len(code.strips)

    def code_strips(self) -> list[CodeStrip]:
        """Every code block of the body, top to bottom, in body coordinates."""
        strips = []
        for top, document in zip(self.tops, self.documents):
            for strip in code_layout(document).strips:
                strips.append(CodeStrip(strip.window.translated(0, top), strip.row.translated(0, top), strip.width,
                                        strip.background))
        return strips

    def code_at(self, point: QPointF) -> int | None:
        """The number of the code block under a point (body coordinates), if any."""
        return next((number for number, strip in enumerate(self.code_strips()) if strip.row.contains(point)), None)

    def anchor_at(self, point: QPointF) -> str:
        """The link under a point (body coordinates), or ""."""
        for top, document in zip(self.tops, self.documents):
            if top <= point.y() <= top + document.size().height():
                return document.documentLayout().anchorAt(QPointF(point.x(), point.y() - top))
        return ""


def _gap(above: QTextDocument, below: QTextDocument) -> float:
    """The space one document would leave between the last block of above and below's first."""
    frames = below.rootFrame().childFrames()
    if frames and frames[0].firstPosition() <= 1:
        return 0.0  # A table (a code block, a Markdown table) sits right under what precedes it.
    # Between two blocks the larger margin wins; they do not add up.
    return max(above.lastBlock().blockFormat().bottomMargin(), below.firstBlock().blockFormat().topMargin())


class GrowingAnswer:
    """An answer being written, laid out block by block: only the last block is new.

    Each frame of a streaming answer used to lay out the whole Markdown text again: a
    cost that grows with the answer. Here the blocks before the last keep their
    documents, so a frame costs about one block, however long the answer is.
    """

    def __init__(self, make_document: Callable[[str], QTextDocument]) -> None:
        self._make_document = make_document
        self._cutter = BlockCutter()
        self._blocks: list[tuple[str, QTextDocument]] = []
        self._first_new: int | None = None

    def layout(self, text: str) -> MessageBody:
        starts = [0, *self._cutter.feed(text)]
        pieces = [text[start:end] for start, end in zip(starts, [*starts[1:], len(text)])]
        documents = []
        for number, piece in enumerate(pieces):
            if number < len(self._blocks) and self._blocks[number][0] == piece:
                documents.append(self._blocks[number][1])
                continue
            document = self._make_document(piece)
            del self._blocks[number:]
            self._blocks.append((piece, document))
            documents.append(document)
            self._first_new = number if self._first_new is None else min(self._first_new, number)
        del self._blocks[len(pieces):]
        return MessageBody(documents)

    def take_first_new(self) -> int:
        """The first block laid out anew since the last call (the number of blocks: none)."""
        first, self._first_new = self._first_new, None
        return len(self._blocks) if first is None else first
