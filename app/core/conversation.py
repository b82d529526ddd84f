"""Conversations and their messages, as values that cross every layer."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TypeAlias

from app.core.answer_stats import AnswerStats
from app.core.attachments import AttachedFile, AttachedImage, SourceRef
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
    # A tool's result given back to the model (the API server's requests). The history
    # stores none as a message: a chat's results are parts of its assistant turn.
    TOOL = "tool"


class MessageState(str, Enum):
    """Whether a message is whole, still being written, or was cut short."""

    COMPLETE = "complete"
    # An answer still arriving from the engine; left behind only if Kestrel crashed.
    STREAMING = "streaming"
    # Stopped by the user, by an engine failure, or found STREAMING after a crash.
    INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class TextPart:
    """Text the model wrote in a turn that used tools: before a call, or its answer after."""

    text: str


@dataclass(frozen=True)
class ToolCallPart:
    """A call the model made: `call_id` pairs it with its result.

    `name` is the name the model called (the tool's own, or `server__name` where two
    servers share one), so the turn goes back to the model as it wrote it; `server` is
    whose tool it was ("" if the model named no tool there is). `arguments` is a JSON
    object's text, as the model wrote it (re-dumped).
    """

    call_id: str
    server: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolResultPart:
    """What a call gave back, as the model was given it.

    is_error: the tool failed (it said so, raised, timed out or its server died; `text`
    says which). denied: the user refused the call, and `text` is what the model was told.
    """

    call_id: str
    text: str
    is_error: bool = False
    denied: bool = False


Part: TypeAlias = TextPart | ToolCallPart | ToolResultPart


def joined_text(parts: tuple[Part, ...]) -> str:
    """The visible answer of a turn with these parts: its texts, a blank line between two.

    What Message.text holds for a turn that used tools (the text before a call and the
    answer after it are one answer to the user)."""
    return "\n\n".join(text for part in parts if isinstance(part, TextPart) and (text := part.text.strip()))


@dataclass(frozen=True)
class Message:
    """One message of a conversation, as stored in the history.

    `created` is Unix epoch seconds. `stats` holds what the engine reported about an
    answer (tokens, speed, device, why it ended), or None. `thinking` is what a reasoning model
    thought before the answer in `text` ("" for every other message).

    `parts` is an assistant turn that used tools, in order: text said before its calls,
    the calls, their results, then the next round's text, calls and results, up to the
    answer. `text` stays that turn's visible answer (joined_text(parts)), so whatever
    reads `text` works unchanged. A turn without tools, and every other message, has
    parts == ().

    `attachments`: the files the user attached to this message (user messages only).
    `images`: the images the user attached to this message, as checked and sent to the model
    (user messages only).
    `sources`: the numbered sources this answer was given from the user's files (attached or
    from the chat's collections), which its [n] citations name (assistant messages only).
    `memories`: the ids of the memories this answer was given (app/core/memories.py; assistant
    messages only); ids, not texts, so a memory forgotten since leaves no copy here.
    """

    id: int
    conversation_id: int
    role: Role
    text: str
    created: float
    state: MessageState
    stats: AnswerStats | None
    thinking: str = ""
    parts: tuple[Part, ...] = ()
    attachments: tuple[AttachedFile, ...] = ()
    sources: tuple[SourceRef, ...] = ()
    images: tuple[AttachedImage, ...] = ()
    memories: tuple[int, ...] = ()


@dataclass(frozen=True)
class Conversation:
    """A chat: its title, its system prompt and the settings its answers use.

    `created` and `updated` are Unix epoch seconds; `model` names the model last chosen
    for this chat, or None for the default model. `collections`: the document collections
    (their names) this chat answers from. `memory`: its answers are given the person's memories
    (when memory is on in the settings). `project_id`: the project it belongs to (app/core/projects.py),
    None for none.
    """

    id: int
    title: str
    created: float
    updated: float
    system_prompt: str
    settings: GenerationSettings
    model: str | None
    collections: tuple[str, ...] = ()
    memory: bool = True
    project_id: int | None = None
