"""The remember tool: the model keeps a fact the person asked it to remember, once the person approves it."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from app.core.conversation import Conversation, Message, Role
from app.core.memories import MemoryOrigin, MemoryRefused, memory_text
from app.core.memory_settings import MemoryProposal
from app.core.settings import Settings
from app.core.store.history import HistoryError
from app.service.chats.memory.memory_book import MemoryBook
from app.service.tools.builtin_tools import BUILTIN_SERVER, BuiltinTool
from app.tools.values import ToolInfo, ToolResult

REMEMBER = "remember"
# The tool is offered to an answer whose question asks to remember something: offered to every
# answer, it would put its schema in every prompt (and every saved state), and a small model
# offered a tool calls it where no one asked. Words in the languages people most often write to
# Kestrel in; a question in another language is remembered by hand or by the Remember action.
ASKS_TO_REMEMBER = re.compile(
    r"\b(remember|memori[sz]e|don'?t forget|do not forget|keep in mind|make a note|note that"
    r"|souviens|retiens|n'oublie pas|merk dir|merke dir|vergiss nicht|recuerda|no olvides|ricorda|lembr[ae])",
    re.IGNORECASE)
_INFO = ToolInfo(
    server=BUILTIN_SERVER, name=REMEMBER, model_name=REMEMBER,
    description=("Remember a fact about the user for later chats. Call it only when the user asks you to remember "
                 "something, or to keep it in mind from now on. The user is asked to approve it first."),
    parameters={"type": "object",
                "properties": {"fact": {"type": "string",
                                        "description": "The fact to remember, in one short sentence written from the "
                                                       "user's side, such as \"My daughter is called Ada.\""}},
                "required": ["fact"]})


def remember_tool(book: MemoryBook, settings: Callable[[], Settings]) -> BuiltinTool:
    """The tool, offered in chats that use memory while new memories may be proposed (memory.propose
    is not off), to an answer whose question asks to remember (ASKS_TO_REMEMBER); each call waits for
    the person's approval, which shows the fact."""

    def offered(conversation: Conversation, history: Sequence[Message]) -> bool:
        memory = settings().memory
        if not (memory.enabled and memory.propose is not MemoryProposal.OFF and conversation.memory):
            return False
        question = next((m.text for m in reversed(history) if m.role == Role.USER), "")
        return ASKS_TO_REMEMBER.search(question) is not None

    def summary(arguments: Mapping[str, Any]) -> str:
        return f"Remember \"{_fact(arguments)}\""

    async def run(arguments: Mapping[str, Any], conversation_id: int) -> ToolResult:
        try:
            added = await book.add(_fact(arguments), MemoryOrigin.TOOL, conversation_id)
        except (MemoryRefused, HistoryError, ValueError) as exc:
            return ToolResult(f"It was not remembered: {exc}", is_error=True, cut=False)
        said = "Remembered" if added.new else "Already remembered"
        return ToolResult(f"{said}: {added.memory.text}", is_error=False, cut=False)

    return BuiltinTool(_INFO, offered, summary, run)


def _fact(arguments: Mapping[str, Any]) -> str:
    """The fact as it will be kept; ValueError in words for the model when there is none to keep."""
    fact = arguments.get("fact")
    if not isinstance(fact, str):
        raise ValueError("The remember tool takes the fact to remember as \"fact\", a text.")
    try:
        return memory_text(fact)
    except MemoryRefused as exc:
        raise ValueError(str(exc)) from None
