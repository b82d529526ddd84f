"""Reading a request's JSON body field by field: a wrong type is a 400 that names the field."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from app.server.errors import BadRequest

# Bigger bodies are refused before they are parsed: a prompt this long fits no local context.
MAX_BODY_BYTES = 32 * 1024 * 1024


def too_large(size: int) -> BadRequest:
    """A body past MAX_BODY_BYTES (Anthropic's own limit; images in base64 are most of such a body)."""
    return BadRequest(f"The request body is {size:,} bytes; at most {MAX_BODY_BYTES:,} are accepted. Send less: fewer "
                      "or smaller images (base64 makes each a third larger), or shorter messages.", status=413)


def parse_json(raw: bytes) -> Body:
    """The body as an object, or BadRequest saying what is wrong with it."""
    if len(raw) > MAX_BODY_BYTES:
        raise too_large(len(raw))
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"The request body is not valid JSON ({exc}). Send a JSON object with "
                         "Content-Type: application/json.") from None
    if not isinstance(data, dict):
        raise BadRequest(f"The request body must be a JSON object, not {_kind(data)}.")
    return Body(data)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


class Body:
    """One JSON object of a request; `at` is its path, for messages ("messages[2].content")."""

    def __init__(self, data: Mapping[str, Any], at: str = "") -> None:
        self.data = data
        self.at = at

    def name(self, key: str) -> str:
        return f"{self.at}.{key}" if self.at else key

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def wrong(self, key: str, wanted: str) -> BadRequest:
        value = self.data.get(key)
        return BadRequest(f"{self.name(key)} must be {wanted}, not {_kind(value)}.", self.name(key))

    def missing(self, key: str, wanted: str) -> BadRequest:
        return BadRequest(f"{self.name(key)} is required: {wanted}.", self.name(key))

    def text(self, key: str, *, required: bool = False) -> str | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise self.missing(key, "a string")
            return None
        if not isinstance(value, str):
            raise self.wrong(key, "a string")
        return value

    def flag(self, key: str) -> bool | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, bool):
            raise self.wrong(key, "true or false")
        return value

    def number(self, key: str, low: float | None = None, high: float | None = None) -> float | None:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.wrong(key, "a number")
        self._check_range(key, value, low, high)
        return float(value)

    def integer(self, key: str, low: int | None = None, high: int | None = None, *,
                required: bool = False) -> int | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise self.missing(key, "a whole number")
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.wrong(key, "a whole number")
        self._check_range(key, value, low, high)
        return value

    def _check_range(self, key: str, value: float, low: float | None, high: float | None) -> None:
        if (low is not None and value < low) or (high is not None and value > high):
            span = (f"from {low:g} to {high:g}" if low is not None and high is not None
                    else f"at least {low:g}" if low is not None else f"at most {high:g}")
            raise BadRequest(f"{self.name(key)} must be {span} (got {value:g}).", self.name(key))

    def texts(self, key: str, *, most: int = 16) -> tuple[str, ...]:
        """A string or an array of strings (as `stop` is); () when absent."""
        value = self.data.get(key)
        if value is None:
            return ()
        if isinstance(value, str):
            return (value,) if value else ()
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.wrong(key, "a string or an array of strings")
        if len(value) > most:
            raise BadRequest(f"{self.name(key)} holds {len(value)} strings; at most {most} are accepted.",
                             self.name(key))
        return tuple(item for item in value if item)

    def child(self, key: str, *, required: bool = False) -> Body | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise self.missing(key, "an object")
            return None
        if not isinstance(value, dict):
            raise self.wrong(key, "an object")
        return Body(value, self.name(key))

    def items(self, key: str, *, required: bool = False) -> list[Any] | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise self.missing(key, "an array")
            return None
        if not isinstance(value, list):
            raise self.wrong(key, "an array")
        return value

    def objects(self, key: str, *, required: bool = False) -> list[Body]:
        """An array of objects, each readable as a Body named by its index."""
        found = self.items(key, required=required) or []
        bodies = []
        for index, item in enumerate(found):
            where = f"{self.name(key)}[{index}]"
            if not isinstance(item, dict):
                raise BadRequest(f"{where} must be an object, not {_kind(item)}.", where)
            bodies.append(Body(item, where))
        return bodies
