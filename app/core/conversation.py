"""Conversations and their messages, as values that cross every layer."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from app.core.answer_stats import AnswerStats
from app.core.generation import GenerationSettings


# The title of a chat made before its first message; that message then names it.
UNTITLED = "New chat"

# The values of these enums are written to the history database: add new members, but
# never rename or reuse a value.


class Role(str, Enum):
    """Who wrote a message."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    # A tool's result given back to the model (the API server's requests); the history
    # stores none yet.
    TOOL = "tool"


class MessageState(str, Enum):
    """Whether a message is whole, still being written, or was cut short."""

    COMPLETE = "complete"
    # An answer still arriving from the engine; left behind only if Kestrel crashed.
    STREAMING = "streaming"
    # Stopped by the user, by an engine failure, or found STREAMING after a crash.
    INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class Message:
    """One message of a conversation, as stored in the history.

    `created` is Unix epoch seconds. `stats` holds what the engine reported about an
    answer (tokens, speed, device, why it ended), or None. `thinking` is what a reasoning model
    thought before the answer in `text` ("" for every other message).
    """

    id: int
    conversation_id: int
    role: Role
    text: str
    created: float
    state: MessageState
    stats: AnswerStats | None
    thinking: str = ""


@dataclass(frozen=True)
class Conversation:
    """A chat: its title, its system prompt and the settings its answers use.

    `created` and `updated` are Unix epoch seconds; `model` names the model last chosen
    for this chat, or None for the default model.
    """

    id: int
    title: str
    created: float
    updated: float
    system_prompt: str
    settings: GenerationSettings
    model: str | None
