"""The quick-ask window's exchange: the chat pane's own message list, fed with one conversation's events."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtWidgets import QSizePolicy, QStyleOptionViewItem, QWidget

from app.core.conversation import Message, Role
from app.service import events as ev
from app.ui.messages.message_view import MessageView
from app.ui.messages.tool_parts import message_markdown
from app.ui.state.bridge import StreamBridge
from app.ui.state.message_model import MessageListModel

# The list grows with the answer up to this height (logical pixels), then scrolls.
TALLEST = 420
# What a message offers here: the exchange is asked again or edited by asking, not from its icons.
OFFERED = frozenset({"copy"})
# What a screen reader hears of a message's keys here (the chat's list names F2 and Ctrl+R too).
KEYS_SAID = "Ctrl+C copies it; Enter selects its text; the menu key lists these."


class ExchangeModel(MessageListModel):
    """The chat's message model, saying only the keys the quick-ask window offers."""

    def data(self, index: QModelIndex | QPersistentModelIndex,
             role: int = Qt.ItemDataRole.DisplayRole) -> object:  # Override MessageListModel.data.
        if role == Qt.ItemDataRole.AccessibleDescriptionRole and index.isValid():
            return KEYS_SAID
        return super().data(index, role)


class QuickAnswers(MessageView):
    """The exchange's questions and answers, drawn as the chat pane draws them (the same view,
    delegate and Markdown; a growing answer coalesced by a StreamBridge, paced per frame), as
    tall as they are up to TALLEST.

    `hear(event)` takes the service's events and keeps those of `conversation_id()`: an answer
    started (the questions saved before it join first, from `questions()`), grew, called tools
    (their calls and results shown as the chat shows them), ended. Each message offers Copy
    alone (OFFERED). grewTaller(): its height changed (the window fits itself around it).
    """

    grewTaller = Signal()

    def __init__(self, conversation_id: Callable[[], int | None], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._conversation_id = conversation_id
        self.setObjectName("quickAnswers")
        self.delegate.offered = OFFERED
        self.exchange = ExchangeModel(self)
        self.bridge = StreamBridge(self)
        self.bridge.textGrew.connect(self.exchange.append_text)
        self.setModel(self.exchange)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setFixedHeight(0)
        self.verticalScrollBar().rangeChanged.connect(lambda *_: self.fit())
        self.exchange.rowsInserted.connect(lambda *_: self.fit())
        self.exchange.modelReset.connect(lambda *_: self.fit())

    def hear(self, event: ev.Event, questions: Callable[[], list[Message]]) -> bool:
        """Take one of the service's events if it is about this exchange; True if it was."""
        mine = self._conversation_id()
        if mine is None:
            return False
        if isinstance(event, ev.AnswerStarted) and event.message.conversation_id == mine:
            shown = {message.id for message in self.exchange.messages()}
            for question in questions():
                if question.id not in shown and question.conversation_id == mine:
                    self.exchange.append(question)
            self.exchange.append(event.message)
        elif isinstance(event, ev.TextGrew) and event.conversation_id == mine:
            self.bridge.push(event.message_id, event.delta, event.thinking)
        elif isinstance(event, ev.ToolPartsChanged) and event.conversation_id == mine:
            self.bridge.flush()  # the text said before the call comes before it
            self.exchange.set_parts(event.message_id, event.parts)
        elif isinstance(event, (ev.AnswerFinished, ev.AnswerInterrupted)) and event.message.conversation_id == mine:
            self.bridge.flush()
            self.exchange.replace(event.message)
            self.fit()
        else:
            return False
        return True

    def clear(self) -> None:
        """Start over (a new exchange)."""
        self.bridge.flush()
        self.exchange.reset_to([])

    def last_answer(self) -> str:
        """The newest answer as written (its Markdown), "" before one."""
        answers = [m for m in self.exchange.messages() if m.role == Role.ASSISTANT]
        return message_markdown(answers[-1]) if answers else ""

    def redraw_growing(self) -> None:  # Override MessageView: the window grows with the answer.
        super().redraw_growing()
        self.fit()

    def content_height(self) -> int:
        option = QStyleOptionViewItem()
        return sum(self.delegate.sizeHint(option, self.exchange.index(row, 0)).height()
                   for row in range(self.exchange.rowCount()))

    def fit(self) -> None:
        """As tall as the exchange, up to TALLEST (then it scrolls)."""
        height = min(TALLEST, self.content_height() + 2 * self.frameWidth()) if self.exchange.rowCount() else 0
        if height != self.height():
            self.setFixedHeight(height)
            self.grewTaller.emit()
