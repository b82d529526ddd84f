"""The quick-ask window's tool approval: the chat's approval bar, for the exchange's own tool calls."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QWidget

from app.service import events as ev
from app.service.tools.tool_use import ToolDecision
from app.ui.chat.tool_approval import ToolApprovalBar


class QuickApproval(ToolApprovalBar):
    """Asks whether a tool call of the exchange may run, as the chat pane asks about its open chat's.

    The main window asks only about its open chat, so without this a quick question whose answer
    calls a tool (tools on for new chats in the defaults) would wait for ever, unseen. `hear(event)`
    keeps the calls waiting (ToolApprovalAsked until ToolApprovalSettled, every chat's: the exchange
    may change) and shows the oldest of `conversation_id()`'s; `follow()` shows it again after the
    exchange changed. The choice goes to `answer(approval_id, decision)` (the service's ToolUse.answer,
    which the main window's bar answers through too); nothing runs before it.
    """

    def __init__(self, conversation_id: Callable[[], int | None],
                 answer: Callable[[int, ToolDecision], None], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("toolApproval")  # the chat's bar's look (theme.part_styles' toolApproval)
        self._conversation_id = conversation_id
        self._answer = answer
        self._waiting: dict[int, ev.ToolApprovalAsked] = {}  # by approval id, oldest first
        self.decided.connect(lambda approval_id, decision: self._answer(approval_id, ToolDecision(decision)))

    def hear(self, event: ev.Event) -> bool:
        """Take an approval asked or settled (any chat's); True if it was one."""
        if isinstance(event, ev.ToolApprovalAsked):
            self._waiting[event.approval_id] = event
        elif isinstance(event, ev.ToolApprovalSettled):
            self._waiting.pop(event.approval_id, None)
        else:
            return False
        self.follow()
        return True

    def asked(self) -> ev.ToolApprovalAsked | None:
        """The exchange's oldest tool call waiting for the person, if any."""
        mine = self._conversation_id()
        if mine is None:
            return None
        return next((asked for asked in self._waiting.values() if asked.conversation_id == mine), None)

    def follow(self) -> None:
        """Show the exchange's waiting call (a new one replaces the one shown), or nothing."""
        asked = self.asked()
        if asked is None:
            if self.approval_id is not None:
                self.clear()
        elif asked.approval_id != self.approval_id:
            self.show_request(asked.approval_id, asked.server, asked.tool, asked.arguments)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # Override ToolApprovalBar: Esc hides the window here.
        if event.key() == Qt.Key.Key_Escape:
            event.ignore()  # on to the window, which hides (the call still waits; summoned, it shows again)
            return
        super().keyPressEvent(event)
