"""A group of settings (quick_ask, memory, voice, …) read from its dict: every valid known value over the defaults."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Protocol, TypeVar


class ValidatedGroup(Protocol):
    def validated(self) -> Any: ...


Group = TypeVar("Group", bound=ValidatedGroup)


def group_from_dict(cls: type[Group], data: Mapping[str, Any], problems: list[str], group: str) -> Group:
    """Every valid known value of data over cls's defaults, each checked with the ones before it; each bad one
    named in problems as "group.key". Unknown keys are left out (a newer Kestrel's)."""
    names = {field.name for field in dataclasses.fields(cls)}  # type: ignore[arg-type]
    result = cls()
    for key, value in data.items():
        if key not in names:
            continue
        try:
            result = dataclasses.replace(result, **{key: value}).validated()  # type: ignore[type-var]
        except (ValueError, TypeError):
            problems.append(f"{group}.{key}")
    return result
