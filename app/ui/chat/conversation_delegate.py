"""How the sidebar paints a chat: elided title, busy/waiting/draft markers, relative date, in readable colours."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from PySide6.QtCore import QEvent, QModelIndex, QObject, QPersistentModelIndex, QRect, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QHelpEvent, QPainter, QPalette, QPixmap
from PySide6.QtWidgets import (QAbstractItemView, QLineEdit, QStyle, QStyledItemDelegate, QStyleOptionViewItem,
                               QToolTip, QWidget)

from app.ui.common import icons
from app.ui.state.conversation_model import ConversationRoles

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
# What each marker means, for the tooltip (the marker itself is only a glyph).
MARKER_WORDS = {"busy": "Writing an answer…", "waiting": "Waiting for another chat's answer",
                "edit": "Has an unsent draft", "approve": "A tool call waits for your approval"}

_MARKED_BY = (("approve", ConversationRoles.ASKING), ("busy", ConversationRoles.ANSWERING),
              ("waiting", ConversationRoles.WAITING),
              ("edit", ConversationRoles.HAS_DRAFT))

_Index = QModelIndex | QPersistentModelIndex


def relative_date(ts: float, now: datetime) -> str:
    """When a chat was last changed, as people say it: "14:02", "Yesterday", "Tuesday", "12 Mar", "12 Mar 2025".

    ts is epoch seconds, now a local naive datetime. Names are English on purpose: the
    rest of the window is too, and a locale's month names would mix languages.
    """
    then = datetime.fromtimestamp(ts)
    days = (now.date() - then.date()).days
    if days == 0:
        return f"{then:%H:%M}"
    if days == 1:
        return "Yesterday"
    if 1 < days < 7:  # a week ago would share today's weekday name
        return _WEEKDAYS[then.weekday()]
    day_month = f"{then.day} {_MONTHS[then.month - 1]}"
    return day_month if then.year == now.year else f"{day_month} {then.year}"


def markers(index: _Index) -> tuple[str, ...]:
    """The markers a chat's row shows, left to right: "approve" (a tool call asks), "busy" (answering),
    "waiting", "edit" (a draft)."""
    return tuple(name for name, role in _MARKED_BY if index.data(role))


class RowColors(NamedTuple):
    """What one row is painted with: its fill (None: none), title, date and markers, busy dot."""

    fill: QColor | None
    text: QColor
    muted: QColor
    accent: QColor


def contrast(first: QColor, second: QColor) -> float:
    """WCAG's contrast ratio of two opaque colours (1 to 21)."""
    def luminance(color: QColor) -> float:
        channels = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
                    for c in (color.redF(), color.greenF(), color.blueF())]
        return 0.2126 * channels[0] + 0.7152 * channels[1] + 0.0722 * channels[2]
    light, dark = sorted((luminance(first), luminance(second)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def legible(color: QColor, background: QColor, toward: QColor, ratio: float) -> QColor:
    """color, moved toward `toward` (the text colour) just enough to reach ratio on background."""
    for step in range(11):
        mixed = _over(QColor.fromRgbF(toward.redF(), toward.greenF(), toward.blueF(), step / 10), color)
        if contrast(mixed, background) >= ratio:
            return mixed
    return QColor(toward)


def _over(top: QColor, bottom: QColor) -> QColor:
    """top (with its alpha) painted over opaque bottom."""
    a = top.alphaF()
    return QColor.fromRgbF(*(t * a + b * (1 - a) for t, b in ((top.redF(), bottom.redF()),
                           (top.greenF(), bottom.greenF()), (top.blueF(), bottom.blueF()))))


class ConversationDelegate(QStyledItemDelegate):
    """Paints one chat per row: the title elided on one line, markers, and the date right-aligned and muted.

    Colours are read from the view's palette at paint time, so rows follow a theme change.
    `pulse` (0..1) is the busy dot's brightness; the Sidebar moves it while a chat answers.
    """

    PAD_X, PAD_Y, GAP, MARKER = 10, 8, 6, 14

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.pulse = 1.0

    # --- what a row shows (also what the tests check) --------------------------------

    def markers(self, index: _Index) -> tuple[str, ...]:
        """The icon names this row draws, left to right."""
        return markers(index)

    def date_text(self, index: _Index, now: datetime | None = None) -> str:
        updated = index.data(ConversationRoles.UPDATED)
        return "" if updated is None else relative_date(float(updated), now or datetime.now())

    def elided_title(self, index: _Index, width: int, font: QFont) -> str:
        """The title as painted in width pixels: one line, "…" at the end when it does not fit."""
        title = " ".join(str(index.data() or "").split())  # a pasted title may hold newlines
        return QFontMetrics(font).elidedText(title, Qt.TextElideMode.ElideRight, max(width, 0))

    def date_font(self, font: QFont) -> QFont:
        small = QFont(font)
        small.setPointSizeF(font.pointSizeF() * 0.88)
        return small

    def title_rect(self, option: QStyleOptionViewItem, index: _Index) -> QRect:
        """Where the title goes: what the date and markers leave of the row."""
        date = self.date_text(index)
        date_width = QFontMetrics(self.date_font(option.font)).horizontalAdvance(date) if date else 0
        marks = len(self.markers(index))
        right = date_width + marks * (self.MARKER + self.GAP) + (self.GAP * 2 if date else 0)
        return option.rect.adjusted(self.PAD_X, 0, -self.PAD_X - right, 0)

    # --- painting ---------------------------------------------------------------------

    def sizeHint(self, option: QStyleOptionViewItem, index: _Index) -> QSize:  # Override QStyledItemDelegate.
        return QSize(120, QFontMetrics(option.font).height() + 2 * self.PAD_Y)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:  # Override.
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        colors = self.row_colors(option)
        self._paint_background(painter, option, colors)
        rect = option.rect
        date = self.date_text(index)
        right = rect.right() - self.PAD_X
        if date:
            small = self.date_font(option.font)
            painter.setFont(small)
            painter.setPen(colors.muted)
            width = QFontMetrics(small).horizontalAdvance(date)
            painter.drawText(QRect(right - width, rect.top(), width, rect.height()),
                             int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight), date)
            right -= width + self.GAP * 2
        for name in reversed(self.markers(index)):
            right -= self.MARKER
            self._paint_marker(painter, name, QRect(right, rect.center().y() - self.MARKER // 2 + 1,
                                                    self.MARKER, self.MARKER), colors)
            right -= self.GAP
        title_rect = self.title_rect(option, index)
        painter.setFont(option.font)
        painter.setPen(colors.text)
        painter.drawText(title_rect, int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft),
                         self.elided_title(index, title_rect.width(), option.font))
        painter.restore()

    def row_colors(self, option: QStyleOptionViewItem) -> RowColors:
        """The row's colours from the palette now, muted ones darkened or lightened until they stay readable
        on the row's selection or hover (WCAG AA: 4.5:1 for the date, 3:1 for the busy dot)."""
        palette, state = option.palette, option.state
        view = option.widget
        ground = palette.color(view.viewport().backgroundRole() if isinstance(view, QAbstractItemView)
                               else QPalette.ColorRole.Base)
        text = palette.color(QPalette.ColorRole.Text)
        fill: QColor | None = None
        if state & QStyle.StateFlag.State_Selected:
            fill = QColor(palette.color(QPalette.ColorRole.Highlight))
            fill.setAlphaF(0.30 if state & QStyle.StateFlag.State_HasFocus else 0.22)
        elif state & QStyle.StateFlag.State_MouseOver:
            fill = QColor(text)
            fill.setAlphaF(0.07)
        behind = ground if fill is None else _over(fill, ground)
        return RowColors(fill, text, legible(palette.color(QPalette.ColorRole.PlaceholderText), behind, text, 4.5),
                         legible(palette.color(QPalette.ColorRole.Highlight), behind, text, 3.0))

    def _paint_background(self, painter: QPainter, option: QStyleOptionViewItem, colors: RowColors) -> None:
        """Rounded selection and hover, light enough that the row's text keeps its own colour."""
        state = option.state
        box = option.rect.adjusted(4, 1, -4, -1)
        painter.setPen(Qt.PenStyle.NoPen)
        if colors.fill is not None:
            painter.setBrush(colors.fill)
            painter.drawRoundedRect(box, 6, 6)
        if state & QStyle.StateFlag.State_HasFocus and not state & QStyle.StateFlag.State_Selected:
            # The keyboard's place in the list, when it is on a row that is not selected.
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.setPen(colors.accent)
            painter.drawRoundedRect(box, 6, 6)

    def _paint_marker(self, painter: QPainter, name: str, box: QRect, colors: RowColors) -> None:
        if name == "busy":
            accent = QColor(colors.accent)
            accent.setAlphaF(0.35 + 0.65 * self.pulse)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(accent)
            painter.drawEllipse(box.center(), 4, 4)
            return
        ratio = painter.device().devicePixelRatioF() if painter.device() else 1.0
        painter.drawPixmap(box, _pixmap(name, box.width(), colors.muted, ratio))

    # --- rename and tooltip -----------------------------------------------------------

    def updateEditorGeometry(self, editor: QWidget, option: QStyleOptionViewItem, index: _Index) -> None:  # Override.
        editor.setGeometry(option.rect.adjusted(4, 1, -4, -1))  # over the row's rounded box, hiding it

    def createEditor(self, parent: QWidget, option: QStyleOptionViewItem, index: _Index) -> QWidget:  # Override.
        editor = super().createEditor(parent, option, index)
        if isinstance(editor, QLineEdit):
            editor.setFrame(True)  # a visible field: a frameless one on the dark list hardly shows
            editor.setTextMargins(self.PAD_X - 9, 0, 0, 0)  # the text stays where the title was
        return editor

    def helpEvent(self, event: QHelpEvent, view: QAbstractItemView, option: QStyleOptionViewItem,
                  index: _Index) -> bool:  # Override QStyledItemDelegate.helpEvent.
        if event.type() != QEvent.Type.ToolTip or not index.isValid():
            return super().helpEvent(event, view, option, index)
        lines = [str(index.data(Qt.ItemDataRole.ToolTipRole) or index.data() or "")]
        lines += [MARKER_WORDS[name] for name in self.markers(index)]
        QToolTip.showText(event.globalPos(), "\n".join(lines), view)
        return True


_pixmaps: dict[tuple[str, int, str, float], QPixmap] = {}


def _pixmap(name: str, size: int, color: QColor, ratio: float) -> QPixmap:
    """icons.pixmap, kept per (name, size, colour, ratio): rows repaint often, the colours rarely change."""
    key = (name, size, color.name(QColor.NameFormat.HexArgb), ratio)
    if key not in _pixmaps:
        _pixmaps[key] = icons.pixmap(name, size, color, ratio)
    return _pixmaps[key]


