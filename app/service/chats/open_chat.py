"""The chat on screen: which one it is, its messages, and the new chat not yet saved."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from app.core.conversation import UNTITLED, Conversation, Message
from app.core.generation import GenerationSettings
from app.core.store.history import HistoryError
from app.service.chats.conversations import Conversations
from app.service.event_bus import EventBus
from app.service.events import (ConversationChanged, ConversationModelChosen, ConversationOpened, Event, MessageAdded,
                                MessagesRemoved, Problem)
from app.service.chats.streaming import StreamingAnswer

LiveAnswer = Callable[[int], StreamingAnswer | None]


class OpenChat:
    """The window's open chat: `conversation` (None for a new chat, saved on its first
    message), its `messages`, and the new chat's model choice.

    `opened` counts chats opened, so a late save knows whether its chat is still shown.
    It follows ConversationChanged on the bus, so `conversation` is the saved form once
    any owner changed it. The CLI's chat and the API server need none of this.
    """

    def __init__(self, conversations: Conversations, bus: EventBus) -> None:
        self._conversations = conversations
        self._emit = bus.emit
        self.conversation: Conversation | None = None
        self.messages: list[Message] = []
        self.opened = 0
        self.new_chat_model: str | None = None
        bus.subscribe(self._heard)

    @property
    def id(self) -> int | None:
        return self.conversation.id if self.conversation is not None else None

    def model_id(self) -> str | None:
        """The open chat's own model (None: the default model); a new chat's choice too."""
        return self.conversation.model if self.conversation is not None else self.new_chat_model

    def settings(self) -> tuple[str, GenerationSettings]:
        """Its system prompt and generation settings (the defaults for a new chat)."""
        if self.conversation is None:
            return self._conversations.new_chat_system_prompt(), self._conversations.new_chat_settings()
        return self.conversation.system_prompt, self.conversation.settings

    def context_length(self) -> int:
        return self.settings()[1].context_length

    async def set_settings(self, system_prompt: str, settings: GenerationSettings) -> bool:
        """Change its system prompt and settings (saving a new chat first); False (said) if the history refused."""
        try:
            await self._conversations.update(await self.ensure_saved(), system_prompt, settings)
        except HistoryError as exc:
            self._emit(Problem(str(exc), "history"))
            return False
        return True

    async def choose_model(self, model_id: str | None) -> None:
        """Its own model (None: the default), loaded when it is next sent to; a new chat keeps the choice
        until its first message saves it."""
        conversation_id = self.id
        if conversation_id is None:
            self.new_chat_model = model_id
        elif not await self._conversations.choose_model(conversation_id, model_id):
            return
        self._emit(ConversationModelChosen(conversation_id, model_id))

    def _heard(self, event: Event) -> None:
        if isinstance(event, ConversationChanged) and self.id == event.conversation.id:
            self.conversation = event.conversation

    # --- which chat --------------------------------------------------------------------

    def show_new(self) -> None:
        """An empty chat; it is saved when its first message is sent."""
        self.conversation = None
        self.messages = []
        self.new_chat_model = None
        self.opened += 1
        self._emit(ConversationOpened(None, ()))

    async def show(self, conversation_id: int, live: LiveAnswer) -> bool:
        """Show a saved chat (read on the writer thread), with all of its answer being
        written that arrived (`live`); False (said) if it cannot be read."""
        try:
            conversation = await self._conversations.get(conversation_id)
            messages = await self._conversations.messages(conversation_id)
        except (HistoryError, KeyError) as exc:
            self._emit(Problem(str(exc) if isinstance(exc, HistoryError) else "That chat is no longer there.",
                               "history"))
            return False
        stream = live(conversation_id)
        if stream is not None:
            # The history holds the answer as of its last save; show all that arrived.
            messages = [dataclasses.replace(m, text=stream.text, thinking=stream.thinking)
                        if m.id == stream.message_id else m for m in messages]
        self.conversation, self.messages = conversation, messages
        self.opened += 1
        self._emit(ConversationOpened(conversation, tuple(messages)))
        return True

    def adopt(self, conversation: Conversation, opened: int) -> None:
        """The new chat the user sent from was saved: it becomes the open chat, if the user
        still looks at it (nothing was opened since `opened`)."""
        if self.opened == opened and self.conversation is None:
            self.conversation = conversation
            self._emit(ConversationChanged(conversation))  # now as the open chat

    async def ensure_saved(self) -> int:
        """The open chat's id, saving a new chat first (HistoryError for the caller)."""
        if self.conversation is None:
            self.conversation = await self._conversations.create(UNTITLED, self.new_chat_model)
        return self.conversation.id

    def untitled(self, conversation_id: int) -> bool:
        """It is open, has no message yet and still has the title a chat gets before one."""
        return (self.conversation is not None and self.conversation.id == conversation_id and not self.messages
                and self.conversation.title == UNTITLED)

    # --- its messages ------------------------------------------------------------------

    def add(self, message: Message) -> None:
        """Show a message in the open chat (once: reopening the chat may have read it already)."""
        if (self.conversation is not None and message.conversation_id == self.conversation.id
                and all(shown.id != message.id for shown in self.messages[-4:])):
            self.messages.append(message)
            self._emit(MessageAdded(message))

    def replace(self, message: Message) -> None:
        for row, shown in enumerate(self.messages):
            if shown.id == message.id:
                self.messages[row] = message

    def remove_from(self, first: Message) -> None:
        if self.conversation is not None and first.conversation_id == self.conversation.id:
            self.messages = [m for m in self.messages if m.id < first.id]
        self._emit(MessagesRemoved(first.conversation_id, first.id))
