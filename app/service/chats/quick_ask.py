"""Quick ask's exchange: a chat of its own beside the window's open chat, answered in the same line."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from functools import partial
from typing import Any

from app.core.attachments import AttachedImage
from app.core.conversation import Conversation, Message
from app.service.chats.answering import Answering
from app.service.chats.recipient import Recipient
from app.service.chats.vision import VisionState
from app.service.settings_keeper import SettingsKeeper


class Exchange:
    """One quick-ask exchange: its chat once saved (`conversation_id`), whether the person took it
    to the main window (`kept`), whether it is over, and how many of its messages are still being
    saved (it is closed only once none is: deleting a chat under a message being saved would lose
    the message with a wrong "That chat is gone")."""

    def __init__(self) -> None:
        self.conversation_id: int | None = None
        self.kept = False
        self.over = False
        self.saving = 0


class QuickAsk:
    """What the quick-ask window's question does: the first starts a new chat titled by it (the app's
    model answers), follow-ups continue it until `new_exchange` or `end` (the window closed for good).

    The answers wait in the one line every chat's do (Answering's AnswerQueue, one engine), so the
    events are the usual ones (AnswerStarted, TextGrew, AnswerFinished, AnswerInterrupted) with this
    exchange's conversation id: the window shows only its own. When the settings keep no quick-ask
    chats (`quick_ask.save_chats` off), an exchange that is over is deleted, unless `hand_over` gave
    it to the main window ("Continue in Kestrel"); with them kept, its answer is only stopped.
    """

    def __init__(self, answers: Answering, keeper: SettingsKeeper, vision: Callable[[], VisionState],
                 spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]]) -> None:
        self._answers = answers
        self._keeper = keeper
        self.vision = vision  # whether the app's model (the one that answers here) sees images, and why not
        self._spawn = spawn
        self._exchange: Exchange | None = None
        self._questions: list[Message] = []  # the exchange's questions as saved, oldest first
        self._returned = ""

    @property
    def conversation_id(self) -> int | None:
        """The exchange's chat (None: no question asked yet, or the first is still being saved)."""
        return self._exchange.conversation_id if self._exchange is not None else None

    @property
    def busy(self) -> bool:
        """Its question is being saved, answered or waits its turn (its Ask is a Stop)."""
        exchange = self._exchange
        return exchange is not None and self._answers.queue.turn_of(exchange.conversation_id, exchange) is not None

    def questions(self) -> list[Message]:
        """The exchange's questions as saved (the window shows each before its answer)."""
        return list(self._questions)

    def ask(self, text: str, images: Sequence[AttachedImage] = ()) -> bool:
        """Ask in this exchange (a new chat the first time); False as Answering.send_to says (nothing
        to ask, no history, still answering, or images the model cannot see: a Problem says so)."""
        exchange = self._exchange or Exchange()
        recipient = Recipient(exchange.conversation_id, None, saved=partial(self._saved, exchange),
                              add=partial(self._added, exchange), vision=self.vision, asker=exchange,
                              unsent=partial(self._unsent, exchange))
        if not self._answers.send_to(recipient, text, images=images):
            return False
        exchange.saving += 1
        self._exchange = exchange
        return True

    def stop(self) -> None:
        """Stop the answer (what was written stays), or take the question out of the line."""
        exchange = self._exchange
        turn = self._answers.queue.turn_of(exchange.conversation_id, exchange) if exchange is not None else None
        if turn is not None:
            self._answers.queue.drop(turn)

    def new_exchange(self) -> asyncio.Task[Any] | None:
        """Start over: the next question starts a new chat. The exchange that ends has its answer
        stopped, and is deleted when quick-ask chats are not kept; returns that work, to await."""
        exchange, self._exchange, self._questions = self._exchange, None, []
        if exchange is None:
            return None
        exchange.over = True
        return self._spawn(self._close(exchange)) if exchange.saving == 0 else None  # else once saved

    def end(self) -> asyncio.Task[Any] | None:
        """The window is closed for good (Kestrel quits): the exchange is over as for a new one."""
        return self.new_exchange()

    def hand_over(self) -> int | None:
        """"Continue in Kestrel": the exchange's chat is kept whatever the settings say and goes to the
        main window (its answer goes on); quick ask starts a new one. None if no chat is saved yet."""
        exchange, self._exchange, self._questions = self._exchange, None, []
        if exchange is None:
            return None
        exchange.kept = True
        return exchange.conversation_id

    def take_returned(self) -> str:
        """The text of a question that could not be saved (once), for the window's input."""
        returned, self._returned = self._returned, ""
        return returned

    def _saved(self, exchange: Exchange, conversation: Conversation) -> None:
        exchange.conversation_id = conversation.id

    def _added(self, exchange: Exchange, message: Message) -> None:
        if exchange is self._exchange:
            self._questions.append(message)
        self._settled(exchange)

    def _unsent(self, exchange: Exchange, text: str) -> None:
        self._returned = text
        self._settled(exchange)

    def _settled(self, exchange: Exchange) -> None:
        exchange.saving -= 1
        if exchange.over and exchange.saving == 0:
            self._spawn(self._close(exchange))

    async def _close(self, exchange: Exchange) -> None:
        conversation_id = exchange.conversation_id
        if conversation_id is None:
            return
        if exchange.kept or self._keeper.settings.quick_ask.save_chats:
            self._answers.stop(conversation_id)
        else:
            await self._answers.delete(conversation_id)  # its answer stopped (and saved) first
