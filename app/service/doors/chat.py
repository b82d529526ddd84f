"""ChatDoor: the chat on screen, for the window's chat and the CLI's `chat`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.core.conversation import Conversation, Message
from app.service.chats.answering import storable
from app.service.chats.temporary import is_temporary

if TYPE_CHECKING:
    from app.service.root import Service


class ChatDoor:
    """Which chat is shown, what its Send, Stop, Regenerate and Edit do, its settings, its model
    and its unsent draft, and the line of chats waiting for an answer.

    The calls are the owners' own (Answering, OpenChat, DraftBook), handed over as they are:
    nothing here passes a call on. Files, images and collections for a message are AttachDoor's.
    A temporary chat (`new_temporary_conversation`, `is_temporary`) is kept in memory only: no
    draft is kept for it, and it is discarded once another chat is shown.
    """

    is_temporary = staticmethod(is_temporary)

    def __init__(self, service: Service) -> None:
        answers, chat, drafts = service.answers, service.chat, service.drafts
        self._answers, self._chat, self._put_draft = answers, chat, drafts.put
        self._temporary, self._conversations = service.temporary, service.conversations
        # Send with files and images: the message is saved at once, its answer waits its turn.
        self.send = answers.send
        self.stop = answers.stop
        self.regenerate = answers.regenerate
        self.edit_and_resend = answers.edit_and_resend
        self.wait_idle = answers.queue.wait_idle
        self.new_conversation = answers.show_new
        self.open_conversation = answers.show
        self.delete_conversation = answers.delete
        self.conversation_settings = chat.settings
        self.set_conversation_settings = chat.set_settings
        self.conversation_model_id = chat.model_id
        self.set_conversation_model = chat.choose_model
        self.draft_for = drafts.text

    async def new_temporary_conversation(self) -> Conversation:
        """Show a new temporary chat (a new chat's defaults and model, no memory, nothing saved); the chat
        shown before is left as New chat leaves it."""
        conversations = self._conversations
        return await self._temporary.start(conversations.new_chat_system_prompt(), conversations.new_chat_settings(),
                                           None)

    @property
    def temporary(self) -> bool:
        """The open chat is a temporary one."""
        return is_temporary(self._chat.id)

    @property
    def conversation(self) -> Conversation | None:
        """The open chat (None: a new chat, saved on its first message)."""
        return self._chat.conversation

    @property
    def messages(self) -> list[Message]:
        return self._chat.messages

    @property
    def open_chat_busy(self) -> bool:
        """The open chat is being answered or waits its turn (its Send is a Stop)."""
        return self._answers.open_chat_busy

    @property
    def answering_id(self) -> int | None:
        """The chat being answered: its answer is being written, or its model loads first."""
        return self._answers.queue.answering_id

    @property
    def waiting_ids(self) -> tuple[int, ...]:
        """The chats whose answers wait for it, in the order they will be answered."""
        return self._answers.queue.waiting_ids

    def save_draft(self, conversation_id: int | None, text: str) -> None:
        """Keep the chat's unsent text (None: the new chat's); returns at once, written on the writer
        thread. Text UTF-8 cannot hold (a broken paste) is kept with U+FFFD: SQLite refuses it. A temporary
        chat's is not kept: it leaves no trace."""
        if not is_temporary(conversation_id):
            self._put_draft(conversation_id, storable(text))
