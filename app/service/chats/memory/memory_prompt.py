"""The memories' section of a system prompt: a fixed intro and a bulleted list, after the chat's own system prompt.

After, not before: chats with the same system prompt and the same memories then begin with the same
tokens, so the engine's saved states (which match a prompt's token prefix) serve every new chat, and a
chat with a system prompt of its own still shares that prompt's states with its other chats. The
list is oldest first, whatever the ranking was, so the same memories always read the same. Each
memory is one line of text (app/core/memories.memory_text); the engine reads it as text, never as
the template's control tokens (app/engine/templates/outside_text.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from app.core.conversation import Role
from app.core.memories import Memory
from app.engine.protocol import ChatMessage
from app.service.chats.memory.memory_choice import SECTION_INTRO


@dataclass(frozen=True)
class MemoryUse:
    """What an answer is given of the memories: the section for its system prompt ("" for none) and
    the ids of the memories in it (kept on the answer: "used 3 memories")."""

    section: str = ""
    ids: tuple[int, ...] = ()

    def system_prompt(self, own: str) -> str:
        """The chat's own system prompt with the section after it."""
        if not self.section:
            return own
        return f"{own.rstrip()}\n\n{self.section}" if own.strip() else self.section

    def messages(self, messages: Sequence[ChatMessage]) -> tuple[ChatMessage, ...]:
        """A request's messages with the section in its system message (one is put first if it has
        none): the API server's requests, when the setting lets them use memory."""
        if not self.section:
            return tuple(messages)
        if messages and messages[0].role == Role.SYSTEM:
            first = messages[0]
            return (replace(first, content=self.system_prompt(first.content)), *messages[1:])
        return (ChatMessage(Role.SYSTEM, self.section), *messages)


NO_MEMORY = MemoryUse()


def memory_section(memories: Sequence[Memory]) -> str:
    """The section for these memories, in the order given ("" for none)."""
    if not memories:
        return ""
    return SECTION_INTRO + "\n" + "\n".join(f"- {memory.text}" for memory in memories)
