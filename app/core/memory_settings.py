"""Memory's settings: whether chats use the person's memories, how new ones are proposed, and whether the API uses them."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from app.core.settings_group import group_from_dict


class MemoryProposal(StrEnum):
    """What Kestrel does with a fact worth remembering: nothing (and the model is not offered its
    remember tool), ask the person first, or keep it. The values are written to settings.json."""

    OFF = "off"
    ASK = "ask"
    AUTOMATIC = "automatic"


@dataclass(frozen=True)
class MemorySettings:
    """settings.json's `memory` group.

    enabled: new answers in chats are given the memories that matter to them. propose: see
    MemoryProposal. api_uses_memory: answers to the local API server use them too (off: requests
    from other programs are not the person).
    """

    enabled: bool = True
    propose: MemoryProposal = MemoryProposal.ASK
    api_uses_memory: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "propose": self.propose.value, "api_uses_memory": self.api_uses_memory}

    def validated(self) -> MemorySettings:
        """These settings, or ValueError in plain words naming the bad one."""
        for name in ("enabled", "api_uses_memory"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"memory.{name} must be true or false (got {getattr(self, name)!r}).")
        try:
            propose = MemoryProposal(self.propose) if isinstance(self.propose, str) else None
        except ValueError:
            propose = None
        if propose is None:
            raise ValueError(f"memory.propose must be one of {', '.join(MemoryProposal)} (got {self.propose!r}).")
        return dataclasses.replace(self, propose=propose)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], problems: list[str]) -> MemorySettings:
        """Every valid known value of data over the defaults; each bad one named in problems."""
        return group_from_dict(cls, data, problems, "memory")
