"""Recipient: the chat a message is sent to (the window's open chat, or quick ask's exchange) and who hears of it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.core.conversation import Conversation, Message
from app.service.chats.vision import VisionState


@dataclass(frozen=True)
class Recipient:
    """The chat a message is sent to, and who hears of it: the window's open chat (`Answering.send`)
    or quick ask's exchange (app/service/chats/quick_ask.py).

    conversation_id: None for a new chat, saved with the message (`saved` hears of it before its
    answer is asked for). model_id: the chat's own model (None: the app's). `add` hears of the
    user's message once it is saved. `untitled`: the chat exists but still has the title a chat
    gets before its first message (the message names it). `collections`: taken when the message is
    taken, saved with it (None: none chosen). `vision`: whether the chat's model sees images (None:
    ask no one, send them). `asker` tells two new chats being saved at once apart (AnswerQueue).
    `unsent` is given back the text of a message that could not be saved (None: it goes back to the
    chat's draft, and SendFailed says so to the window's message box).
    """

    conversation_id: int | None
    model_id: str | None
    saved: Callable[[Conversation], None]
    add: Callable[[Message], None]
    untitled: Callable[[int], bool] = lambda _conversation_id: False
    collections: Callable[[], tuple[str, ...] | None] = lambda: None
    vision: Callable[[], VisionState] | None = None
    asker: object = None
    unsent: Callable[[str], None] | None = None
