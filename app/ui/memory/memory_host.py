"""MemoryHost: the window's memory parts (the Memory window, an answer's used memories, the proposals row), opened from anywhere in it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QWidget
from shiboken6 import isValid

from app.core.conversation import Message
from app.core.memories import MemoryRefused
from app.core.store.history_errors import HistoryError
from app.service.memory_events import MemoryProposalSettled, MemoryProposed
from app.ui.memory.memory_window import MemoryWindow
from app.ui.memory.proposal_row import MemoryProposalRow
from app.ui.memory.used_memories import UsedMemoriesPopup
from app.ui.messages.message_view import MessageView

if TYPE_CHECKING:
    from app.service.doors.window import WindowDoors
    from app.ui.state.adapter import ServiceAdapter


class MemoryHost(QObject):
    """Opens the Memory window (one at a time, `window`) and the list of memories an answer used
    (`popup`: the last one opened), both over `parent`, the main window. Failures to read are said
    through the adapter's `problem` signal, as the window's other problems are."""

    def __init__(self, adapter: "ServiceAdapter", doors: "WindowDoors", parent: QWidget) -> None:
        super().__init__(parent)
        self._adapter, self._doors, self._parent = adapter, doors, parent
        self.window: MemoryWindow | None = None
        self.popup: UsedMemoriesPopup | None = None

    def follow(self, messages: MessageView) -> None:
        """The chat's messages show each answer's "used N memories"; a click on it lists them."""
        messages.delegate.memories_shown = True
        messages.memoriesChosen.connect(self.show_used)

    def propose_in(self, row: MemoryProposalRow) -> None:
        """The chat pane's row shows Kestrel's proposals after a chat and the person answers them there; from
        now on the service asks the model for them (MemoryDoor.listen_for_proposals)."""
        memory = self._doors.memory
        row.chat_title = self._chat_title
        for waiting in memory.proposals():
            row.add(waiting)

        def heard(event: object) -> None:
            if isinstance(event, MemoryProposed):
                row.add(event.proposal)
            elif isinstance(event, MemoryProposalSettled):
                row.settle(event.proposal_id)

        unsubscribe = self._doors.subscribe(heard)
        row.destroyed.connect(lambda *_: (unsubscribe(), memory.listen_for_proposals(False)))
        row.accepted.connect(lambda proposal_id, text: self._adapter.spawn(self._accept(row, proposal_id, text)))
        row.declined.connect(memory.decline_proposal)
        row.undone.connect(lambda memory_id: self._adapter.spawn(self._undo(memory_id)))
        memory.listen_for_proposals(True)

    def _chat_title(self, conversation_id: int) -> str | None:
        found = self._adapter.conversations.conversation(conversation_id)
        return found.title if found is not None else None

    async def _accept(self, row: MemoryProposalRow, proposal_id: int, text: str | None) -> None:
        try:
            await self._doors.memory.accept_proposal(proposal_id, text)
        except KeyError:
            if isValid(row):
                row.settle(proposal_id)  # answered meanwhile (another window, or the proposal is gone)
        except (MemoryRefused, HistoryError) as exc:
            self._adapter.problem.emit(f"That was not remembered: {exc}", "history")

    async def _undo(self, memory_id: int) -> None:
        try:
            await self._doors.memory.remove(memory_id)
        except HistoryError as exc:
            self._adapter.problem.emit(f"That memory could not be forgotten: {exc}", "history")

    def show_window(self) -> None:
        """View → Memory…: not modal (the chat goes on), or brought forward."""
        if self.window is None:
            doors = self._doors
            self.window = MemoryWindow(self._adapter, doors.memory, doors.settings, doors.subscribe, self._parent)
        self.window.show()
        self.window.raise_()
        self.window.activateWindow()

    def show_used(self, message: object) -> None:
        """An answer's "used N memories" was clicked: read which (off the UI thread), then list them."""
        assert isinstance(message, Message)
        self._adapter.spawn(self._show_used(message))

    async def _show_used(self, message: Message) -> None:
        try:
            memories = await self._doors.memory.used_by(message)
        except HistoryError as exc:
            self._adapter.problem.emit(f"The memories this answer used could not be read: {exc}", "history")
            return
        if self.popup is not None and isValid(self.popup):
            self.popup.close()  # one list at a time: the last answer clicked
        self.popup = UsedMemoriesPopup(memories, len(message.memories), self._parent)
        self.popup.manageRequested.connect(self.show_window)
        self.popup.show()
        self.popup.raise_()
