"""What is under a point in a message row: a link, a chip, the text; and the row's tooltips."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QModelIndex, QPersistentModelIndex, QPoint, QPointF
from PySide6.QtGui import QHelpEvent
from PySide6.QtWidgets import QAbstractItemView, QStyleOptionViewItem, QToolTip

from app.ui.state.message_words import image_size_words
from app.core.attachments import AttachedImage
from app.ui.messages.code_blocks import bar_rects, clamp, offset_for_bar
from app.ui.messages.message_documents import MessageDocuments, row_tooltip
from app.ui.messages.message_memories import USED_TIP
from app.ui.messages.message_selection import SelectionEditing

_Index = QModelIndex | QPersistentModelIndex


class RowHits(SelectionEditing):
    """The message delegate's hit tests, apart from its layout and painting (its length).

    Subclasses give message(), body_of(), layout() and action_at(), `documents` (the chips)
    and `copied` (the message just copied).
    """

    documents: MessageDocuments
    copied: int | None

    def action_at(self, index: _Index, point: QPoint) -> str | None:
        raise NotImplementedError

    def memories_at(self, index: _Index, point: QPoint) -> bool:
        raise NotImplementedError

    def anchor_at(self, index: _Index, point: QPoint) -> str:
        """The link under a point in a message, if any."""
        body, text = self.body_of(index), self.layout(index).text
        return body.anchor_at(QPointF(point.x() - text.left(), point.y() - text.top()))

    def chip_at(self, index: _Index, point: QPoint) -> int | None:
        """Which of the row's attachments or sources (its position) has its chip under a point."""
        return self.documents.chip_at(self.message(index), self.layout(index).documents, point)

    def image_at(self, index: _Index, point: QPoint) -> int | None:
        """Which of a user's images (its position) has its thumbnail under a point."""
        return self.documents.image_at(self.message(index), self.layout(index).documents, point)

    def text_at(self, index: _Index, point: QPoint) -> bool:
        """Whether a point (viewport coordinates) is on the row's text."""
        return self.layout(index).text.contains(point)

    def code_at(self, index: _Index, point: QPoint) -> int | None:
        """The number of the row's code block under a point, if it is one that scrolls sideways."""
        body, text = self.body_of(index), self.layout(index).text
        number = body.code_at(QPointF(point.x() - text.left(), point.y() - text.top()))
        return number if number is not None and body.code_strips()[number].overflow > 0 else None

    def code_bar_at(self, index: _Index, point: QPoint) -> int | None:
        """The number of the row's wide code block whose small scrollbar is under a point."""
        number = self.code_at(index, point)
        if number is None:
            return None
        text = self.layout(index).text
        strip = self.body_of(index).code_strips()[number]
        track, _thumb = bar_rects(strip, 0.0)
        local = QPointF(point.x() - text.left(), point.y() - text.top())
        return number if track.adjusted(0, -4, 0, 4).contains(local) else None

    def scroll_code(self, index: _Index, number: int, by: float = 0.0, bar_x: int | None = None) -> bool:
        """Scroll a wide code block sideways (by pixels, or to where its bar is dragged: viewport x);
        whether it moved."""
        strip = self.body_of(index).code_strips()[number]
        offsets = self.code_offsets.setdefault(self.message(index).id, {})
        before = clamp(strip, offsets.get(number, 0.0))
        if bar_x is not None:
            after = offset_for_bar(strip, bar_x - self.layout(index).text.left())
        else:
            after = clamp(strip, before + by)
        offsets[number] = after
        return after != before

    def helpEvent(self, event: QHelpEvent, view: QAbstractItemView, option: QStyleOptionViewItem,  # Override.
                  index: _Index) -> bool:
        """An action's or a chip's tooltip; on an answer, why the model's own chat template was not used."""
        if event.type() == QEvent.Type.ToolTip and index.isValid():
            message = self.message(index)
            image = self.image_at(index, event.pos())
            if image is not None:
                QToolTip.showText(event.globalPos(), image_tip(message.images[image]), view)
                return True
            if self.memories_at(index, event.pos()):
                QToolTip.showText(event.globalPos(), USED_TIP, view)
                return True
            tip = row_tooltip(message, self.action_at(index, event.pos()), self.copied == message.id,
                              self.chip_at(index, event.pos()))
            if tip:
                QToolTip.showText(event.globalPos(), tip, view)
                return True
        return super().helpEvent(event, view, option, index)


def image_tip(image: AttachedImage) -> str:
    """An image thumbnail's tooltip: its name and size, and that a click shows it whole."""
    return f"{image.name} · {image_size_words(image)}\nClick to see it whole and save it."
