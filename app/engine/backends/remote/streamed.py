"""What a server's stream is read into, whatever API it speaks: text, a call, the end with its counts."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from app.core.answer_stats import FinishReason
from app.core.generation import GenerationSettings
from app.engine.protocol import ChatMessage
from app.library.servers.faults import ServerFault, ServerTrouble


def image_media_type(image: bytes) -> str:
    """A PNG's or a JPEG's media type: Kestrel's image check makes one of the two of every image it takes."""
    return "image/png" if image.startswith(b"\x89PNG") else "image/jpeg"


@dataclass(frozen=True)
class Said:
    """Text of the answer (thinking: a reasoning model's thinking, which the server told apart)."""

    text: str
    thinking: bool = False


@dataclass(frozen=True)
class Called:
    """A whole tool call; id: the server's, "" when it gave none."""

    name: str
    arguments: str
    id: str = ""


@dataclass(frozen=True)
class Ended:
    """The answer's end as the server reported it; a count it did not give is None (Kestrel counts then)."""

    finish: FinishReason
    tokens: int | None = None
    prompt_tokens: int | None = None
    tokens_per_s: float | None = None


Piece = Said | Called | Ended
# What a stream's reader raises, made by the caller (it knows the server): the trouble and the detail.
Fault = Callable[[ServerTrouble, str], ServerFault]


@dataclass(frozen=True)
class Asked:
    """One answer's request as a dialect builds it: the endpoint's path and its JSON body."""

    path: str
    body: dict[str, object]


def finish_of(word: object) -> FinishReason:
    """OpenAI's finish_reason or Ollama's done_reason: "length" is the token limit; the rest is a stop."""
    return FinishReason.LENGTH if word == "length" else FinishReason.STOP


def compact_arguments(arguments: object) -> str:
    """A call's arguments as compact JSON object text, as the engine's own calls are (text that is not
    JSON stays as the server sent it, for the tool's runner to refuse in words)."""
    value = arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments or "{}")
        except ValueError:
            return arguments
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def tool_names(messages: tuple[ChatMessage, ...]) -> dict[str, str]:
    """Each call's id to its tool's name: a tool turn names its tool in Ollama's API, not its call."""
    return {call.id: call.name for message in messages for call in message.tool_calls}


def seed_of(settings: GenerationSettings) -> int | None:
    """The seed to send: None for a fresh random one (-1), which a server picks itself."""
    return settings.seed if settings.seed >= 0 else None
