"""Projects: a named group of chats with its own instructions, model, tools, collections and memory choice, and their bounds."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

# A name is a short label in the chat list and on the command line.
MAX_PROJECT_NAME = 100
# Instructions are a system prompt: about 2,000 tokens at most, so that a small model's context
# (4,096 tokens by default) keeps room for the chat itself.
MAX_INSTRUCTIONS = 8_000
# Far above the projects a person keeps; small enough that listing them costs nothing.
MAX_PROJECTS = 1_000
# A project's MCP servers and collections: as many as a chat's settings take (GenerationSettings.validated).
MAX_LIST_ITEMS = 100
MAX_ITEM_CHARS = 200
_QUOTED_CHARS = 40
_CONTROL = re.compile("[\x00-\x1f\x7f]")
# Instructions keep their lines and tabs; other C0 controls and DEL go (a NUL cuts some readers short).
_CONTROL_BUT_LINES = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Project:
    """A project. `model`: the installed model's id its new chats answer with (None: the default model);
    `tools`: the MCP servers (their names in mcp.json) its new chats are offered; `collections`: the
    document collections (their names) its new chats answer from; `memory`: its new chats use the
    person's memories. `created` and `updated` are Unix epoch seconds."""

    id: int
    name: str
    instructions: str = ""
    model: str | None = None
    tools: tuple[str, ...] = ()
    collections: tuple[str, ...] = ()
    memory: bool = True
    created: float = 0.0
    updated: float = 0.0

    def to_dict(self) -> dict[str, object]:
        """As `kestrel projects list --json` and a .kestrel-project file write it (id left to the caller)."""
        return {"id": self.id, "name": self.name, "instructions": self.instructions, "model": self.model,
                "tools": list(self.tools), "collections": list(self.collections), "memory": self.memory,
                "created": self.created, "updated": self.updated}


class ProjectRefusal(StrEnum):
    EMPTY_NAME = "empty_name"
    NAME_TOO_LONG = "name_too_long"
    NAME_TAKEN = "name_taken"
    INSTRUCTIONS_TOO_LONG = "instructions_too_long"
    TOO_MANY_ITEMS = "too_many_items"
    BAD_ITEM = "bad_item"
    FULL = "full"


class ProjectRefused(Exception):
    """A project that cannot be kept as asked: the reason and its facts; str() is plain words every
    front end can show as they are. `what`: the name (NAME_TAKEN, NAME_TOO_LONG) or the list
    ("tools", "collections") concerned; `length`: the characters or items given; `count`: FULL's
    projects kept now."""

    def __init__(self, reason: ProjectRefusal, what: str = "", length: int = 0, count: int = 0) -> None:
        super().__init__(reason, what, length, count)
        self.reason, self.what, self.length, self.count = reason, what, length, count

    def __str__(self) -> str:
        reason = self.reason
        if reason is ProjectRefusal.EMPTY_NAME:
            return "A project needs a name, such as \"Garden\" or \"Thesis\"."
        if reason is ProjectRefusal.NAME_TOO_LONG:
            return (f"That project name (\"{self.what}\") is {self.length:,} characters long; a name holds at most "
                    f"{MAX_PROJECT_NAME}. Choose a shorter one.")
        if reason is ProjectRefusal.NAME_TAKEN:
            return f"There is already a project called \"{self.what}\". Choose another name."
        if reason is ProjectRefusal.INSTRUCTIONS_TOO_LONG:
            return (f"Those instructions are {self.length:,} characters long; a project's instructions hold at most "
                    f"{MAX_INSTRUCTIONS:,} (about 2,000 tokens, so a small model keeps room for the chat). Shorten "
                    "them, or put the long part in a document collection the project answers from.")
        if reason is ProjectRefusal.TOO_MANY_ITEMS:
            return f"A project has at most {MAX_LIST_ITEMS} {self.what}; {self.length:,} were given."
        if reason is ProjectRefusal.BAD_ITEM and self.what == "model":
            return "A project's model must be an installed model's id, on one line."
        if reason is ProjectRefusal.BAD_ITEM:
            return (f"A project's {self.what} must be names of 1 to {MAX_ITEM_CHARS} characters on one line, each "
                    "given once; one of those given is not.")
        return (f"Kestrel already keeps {self.count:,} projects, the most it keeps ({MAX_PROJECTS:,}). Remove one you "
                "no longer need, then try again.")


def project_name(name: str) -> str:
    """The name as a project keeps it: one line, runs of spaces as one; ProjectRefused if empty or too long."""
    if not isinstance(name, str):
        raise TypeError(f"a project's name must be a str, not {type(name).__name__}")
    if len(name) > 4 * MAX_PROJECT_NAME:  # refused before the work below
        raise ProjectRefused(ProjectRefusal.NAME_TOO_LONG, _beginning(name), len(name))
    kept = " ".join(_CONTROL.sub(" ", _SURROGATE.sub("\ufffd", name)).split())
    if not kept:
        raise ProjectRefused(ProjectRefusal.EMPTY_NAME)
    if len(kept) > MAX_PROJECT_NAME:
        raise ProjectRefused(ProjectRefusal.NAME_TOO_LONG, _beginning(kept), len(kept))
    return kept


def project_instructions(text: str) -> str:
    """The instructions as a project keeps them: their lines as written (ends trimmed, Windows line ends
    as one, controls other than line breaks and tabs gone, a lone surrogate as U+FFFD); ProjectRefused
    past MAX_INSTRUCTIONS. Control-token look-alikes (`<|im_start|>`) stay as typed: the engine reads a
    system prompt's text as text (app/engine/templates/outside_text.py)."""
    if not isinstance(text, str):
        raise TypeError(f"a project's instructions must be a str, not {type(text).__name__}")
    if len(text) > 4 * MAX_INSTRUCTIONS:
        raise ProjectRefused(ProjectRefusal.INSTRUCTIONS_TOO_LONG, length=len(text))
    kept = _CONTROL_BUT_LINES.sub("", _SURROGATE.sub("\ufffd", text.replace("\r\n", "\n").replace("\r", "\n")))
    kept = kept.strip()
    if len(kept) > MAX_INSTRUCTIONS:
        raise ProjectRefused(ProjectRefusal.INSTRUCTIONS_TOO_LONG, length=len(kept))
    return kept


def project_names_list(items: Sequence[str], what: str) -> tuple[str, ...]:
    """A project's tools or collections (`what`) as kept: names trimmed, each once, in the order given;
    ProjectRefused if there are too many or one is empty, too long or not a text."""
    if isinstance(items, str) or not isinstance(items, (list, tuple)):
        raise ProjectRefused(ProjectRefusal.BAD_ITEM, what)
    if len(items) > MAX_LIST_ITEMS:
        raise ProjectRefused(ProjectRefusal.TOO_MANY_ITEMS, what, len(items))
    kept: list[str] = []
    for item in items:
        name = item.strip() if isinstance(item, str) else ""
        if not name or len(name) > MAX_ITEM_CHARS or _CONTROL.search(name) or _SURROGATE.search(name) or name in kept:
            raise ProjectRefused(ProjectRefusal.BAD_ITEM, what)
        kept.append(name)
    return tuple(kept)


def project_model(model: str | None) -> str | None:
    """A project's model id as kept (None: the default model); ProjectRefused if it is not a short line."""
    if model is None:
        return None
    if not isinstance(model, str):
        raise ProjectRefused(ProjectRefusal.BAD_ITEM, "model")
    kept = model.strip()
    if len(kept) > 4_096 or _CONTROL.search(kept) or _SURROGATE.search(kept):
        raise ProjectRefused(ProjectRefusal.BAD_ITEM, "model")
    return kept or None


def same_name(first: str, second: str) -> bool:
    """Whether two project names are the same to a person (case and width of letters aside)."""
    return first.casefold() == second.casefold()


def _beginning(text: str) -> str:
    head = " ".join(_CONTROL.sub(" ", text[:4 * _QUOTED_CHARS]).split())
    return head if len(head) <= _QUOTED_CHARS else head[:_QUOTED_CHARS - 1].rstrip() + "…"
