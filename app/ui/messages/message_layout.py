"""Where a message's parts go in its row: the reading column, the bubble, the text, the actions.

One place computes it, so painting, hit-testing (links, actions, the thinking header)
and the text-selection editor all agree to the pixel.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QRect

MAX_COLUMN = 760  # a comfortable reading width; wider windows centre the column
SIDE = 24  # the least space beside the column
SPACING = 12  # above and below each message
PAD = 10
AUTHOR_GAP = 4
BUBBLE_X = 14  # the user's bubble: its padding around the text
BUBBLE_Y = 9
BUBBLE_SHARE = 0.8  # of the column, at most
BUBBLE_RADIUS = 14
ACTIONS_GAP = 2
DOCUMENTS_GAP = 6  # between the text (or bubble) and a message's chips
ACTION = 28  # an action's square (hit box and hover highlight)
ICON = 16


def column(viewport_width: int) -> tuple[int, int]:
    """(left, width) of the reading column in a viewport that wide."""
    width = max(120, min(MAX_COLUMN, viewport_width - 2 * SIDE))
    return max(0, (viewport_width - width) // 2), width


def text_width(column_width: int, user: bool) -> int:
    """The width a message's text is laid out at: the column, or the widest bubble's inside."""
    return max(60, int(column_width * BUBBLE_SHARE) - 2 * BUBBLE_X) if user else column_width


@dataclass(frozen=True)
class Lines:
    """The line heights of the fonts a row uses."""

    line: int  # the messages' font
    small: int  # the author label's and the stats line's


def chrome_height(lines: Lines, user: bool, boundary: bool, thinking: int, documents: int = 0) -> int:
    """A row's height apart from its text (`documents`: its chips', message_documents.py)."""
    height = 2 * SPACING + lines.small + AUTHOR_GAP + thinking + ACTIONS_GAP + ACTION + documents
    if user:
        height += 2 * BUBBLE_Y
    if boundary:
        height += lines.line + PAD
    return height


@dataclass(frozen=True)
class RowLayout:
    """A message's parts in viewport coordinates."""

    column: QRect  # the reading column, the row's height
    boundary: QRect | None  # the "no longer in context" line above the message
    author: QRect
    thinking_top: int
    text: QRect  # where the text is drawn: its left, top, width and height
    bubble: QRect | None  # the user's messages only
    documents: QRect  # the chips under the text: attached files or sources (no height: none)
    actions: QRect  # the row of action icons (and the stats or "writing…" after them)


def row_layout(rect: QRect, viewport_width: int, lines: Lines, *, user: bool, boundary: bool,
               thinking: int = 0, text_size: tuple[int, int] = (0, 0), documents: int = 0) -> RowLayout:
    """The parts of a row at rect, whose text is text_size (width, height) once laid out, and
    whose chips take `documents` (their gap above included) under it."""
    left, width = column(viewport_width)
    col = QRect(rect.left() + left, rect.top(), width, rect.height())
    top = rect.top() + SPACING
    band = None
    if boundary:
        band = QRect(col.left(), top, col.width(), lines.line)
        top += lines.line + PAD
    author = QRect(col.left(), top, col.width(), lines.small)
    top += lines.small + AUTHOR_GAP
    thinking_top = top
    top += thinking
    text_w, text_h = text_size
    bubble = None
    if user:
        outer = text_w + 2 * BUBBLE_X
        bubble = QRect(col.right() + 1 - outer, top, outer, text_h + 2 * BUBBLE_Y)
        text = QRect(bubble.left() + BUBBLE_X, top + BUBBLE_Y, text_w, text_h)
        bottom = bubble.bottom() + 1
    else:
        text = QRect(col.left(), top, text_w, text_h)
        bottom = text.bottom() + 1
    chips = QRect(col.left(), bottom + DOCUMENTS_GAP, col.width(), max(0, documents - DOCUMENTS_GAP))
    bottom += documents
    actions = QRect(col.left(), bottom + ACTIONS_GAP, col.width(), ACTION)
    return RowLayout(col, band, author, thinking_top, text, bubble, chips, actions)
