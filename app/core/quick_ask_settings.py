"""Quick ask's settings: the global shortcut that opens the small window, and what it keeps."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from app.core.settings_group import group_from_dict

DEFAULT_SHORTCUT = "Ctrl+Alt+Space"
# Qt's portable names (QKeySequence.PortableText). Shift alone is not enough for a
# global shortcut: Shift+letter is how a person types capitals in every other program.
MODIFIERS = ("Ctrl", "Alt", "Shift", "Meta", "Num")
HOLDING_MODIFIERS = ("Ctrl", "Alt", "Meta")
_LONGEST_SHORTCUT = 64


def shortcut_problem(text: str) -> str | None:
    """Why `text` cannot be quick ask's shortcut, in plain words, or None if it can.

    "" is allowed: no global shortcut, `kestrel ask` bound in the desktop's own settings
    still opens the window. Otherwise one chord: modifiers and one key, in Qt's portable
    text ("Ctrl+Alt+Space"), holding Ctrl, Alt or the Windows/Super key (Meta).
    """
    if text == "":
        return None
    if len(text) > _LONGEST_SHORTCUT or text != text.strip():
        return f"{text!r} is not a key combination such as {DEFAULT_SHORTCUT}."
    if ", " in text:
        return f"{text!r} is several key presses in a row; a shortcut is one combination such as {DEFAULT_SHORTCUT}."
    modifiers, key = split_chord(text)
    if not key or any(m not in MODIFIERS for m in modifiers):
        return f"{text!r} is not a key combination such as {DEFAULT_SHORTCUT}."
    if not any(m in HOLDING_MODIFIERS for m in modifiers):
        return (f"{text!r} has no Ctrl, Alt or Windows key, so it would take that key from every program; "
                f"hold one of them with the key, such as {DEFAULT_SHORTCUT}.")
    return None


def split_chord(text: str) -> tuple[list[str], str]:
    """The modifiers and the key of one chord in Qt's portable text ("Ctrl++" is Ctrl and "+")."""
    if text.endswith("++"):
        head, key = text[:-2], "+"
    elif text == "+":
        head, key = "", "+"
    else:
        head, _, key = text.rpartition("+")
    return (head.split("+") if head else []), key


@dataclass(frozen=True)
class QuickAskSettings:
    """What quick ask does (settings.json's `quick_ask` group).

    enabled: the global shortcut is held and closing the main window keeps Kestrel in the
    tray. shortcut: Qt key-sequence text (QKeySequence.PortableText); "" binds none.
    save_chats: quick-ask exchanges are kept as chats in the chat list. keep_model_ready:
    while quick ask is on, the idle policy keeps the model loaded so it answers at once.
    """

    enabled: bool = True
    shortcut: str = DEFAULT_SHORTCUT
    save_chats: bool = True
    keep_model_ready: bool = True

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def validated(self) -> QuickAskSettings:
        """These settings, or ValueError in plain words naming the bad one."""
        for name in ("enabled", "save_chats", "keep_model_ready"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"quick_ask.{name} must be true or false (got {getattr(self, name)!r}).")
        if not isinstance(self.shortcut, str):
            raise ValueError(f"quick_ask.shortcut must be a key combination such as {DEFAULT_SHORTCUT}, "
                             f"or empty for none (got {self.shortcut!r}).")
        problem = shortcut_problem(self.shortcut)
        if problem is not None:
            raise ValueError(f"quick_ask.shortcut: {problem}")
        return self

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], problems: list[str]) -> QuickAskSettings:
        """Every valid known value of data over the defaults; each bad one named in problems."""
        return group_from_dict(cls, data, problems, "quick_ask")
