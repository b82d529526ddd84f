"""Reading a request's JSON body field by field: a wrong type is a 400 that names the field."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from typing import Any

from app.server.errors import BadRequest

# Bigger bodies are refused before they are parsed: a prompt this long fits no local context.
MAX_BODY_BYTES = 32 * 1024 * 1024
# A number's text is shown whole up to this length, cut beyond it.
_SHOWN_CHARS = 24
# A lone surrogate can only come from a \udXXX escape or (json reads bytes with surrogatepass)
# from a surrogate's own UTF-8 bytes (0xED first): a UTF-8 body with neither needs no look.
_SURROGATE_HINTS = (b"\\ud", b"\\uD", b"\xed")
# Where a string is in the body: (key or index, where its container is), None at the root.
Trail = tuple["str | int", "Trail"] | None


class _NotReadable(Exception):
    """A value JSON or Kestrel has no place for, met while parsing (raised through json's hooks)."""

    def __init__(self, words: str) -> None:
        super().__init__(words)
        self.words = words


def too_large(size: int) -> BadRequest:
    """A body past MAX_BODY_BYTES (Anthropic's own limit; images in base64 are most of such a body)."""
    return BadRequest(f"The request body is {size:,} bytes; at most {MAX_BODY_BYTES:,} are accepted. Send less: fewer "
                      "or smaller images (base64 makes each a third larger), or shorter messages.", status=413)


def _shown_number(text: str) -> str:
    return text if len(text) <= _SHOWN_CHARS else f"{text[:_SHOWN_CHARS // 2]}… ({len(text):,} characters)"


def _constant(name: str) -> float:
    """json's hook for NaN, Infinity and -Infinity, which Python reads but JSON does not have."""
    raise _NotReadable(f"The request body is not valid JSON: it holds {name}, and JSON numbers are finite. Send a "
                       "number (such as 0.7) in its place.")


def _finite(text: str) -> float:
    """json's hook for a number with a fraction or exponent: one past float's range is no number."""
    value = float(text)
    if not math.isfinite(value):
        raise _NotReadable(f"The request body holds the number {_shown_number(text)}, too large for a JSON number "
                           "(it would read as infinity). Send a finite number.")
    return value


def _loads(raw: bytes) -> Any:
    """The parsed body; BadRequest in words for what Python's json reads but a request may not hold
    (NaN, Infinity), or cannot read (nesting deeper than its recursion, integers past its digit limit)."""
    try:
        return json.loads(raw, parse_constant=_constant, parse_float=_finite)
    except _NotReadable as exc:
        raise BadRequest(exc.words) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"The request body is not valid JSON ({exc}). Send a JSON object with "
                         "Content-Type: application/json.") from None
    except RecursionError:
        raise BadRequest("The request body is nested too deeply to read as JSON (arrays or objects inside one "
                         "another, many hundreds of levels deep). Send a flatter body: a request needs only a "
                         "few levels.") from None
    except ValueError:  # the only other: an integer longer than Python converts (int_max_str_digits)
        raise BadRequest(f"The request body holds a whole number of more than {sys.get_int_max_str_digits():,} "
                         "digits, too long to read as JSON here. Send numbers of an ordinary size.") from None


def _is_text(value: str) -> bool:
    """False for a string holding a lone surrogate (an unpaired \\ud800 escape): it has no UTF-8."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _place(trail: Trail) -> str:
    """A trail as a field's name: messages[0].content."""
    steps: list[str | int] = []
    while trail is not None:
        step, trail = trail
        steps.append(step)
    name = ""
    for step in reversed(steps):
        if isinstance(step, int):
            name += f"[{step}]"
        else:  # a key with a lone surrogate is named with it escaped, so that the answer is UTF-8
            shown = step.encode("utf-8", "backslashreplace").decode("utf-8")
            name += f".{shown}" if name else shown
    return name


def _lone_surrogate(data: object) -> str | None:
    """Where the first string (or key) holding a lone surrogate is, or None. Python's json reads
    such an escape into a string no encoder can write, so it would fail far later: in the engine.
    Iterative, as the body can be nested as deeply as json reads."""
    stack: list[tuple[object, Trail]] = [(data, None)]
    while stack:
        value, trail = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if not _is_text(key):
                    return _place((key, trail))
                if isinstance(item, (dict, list, str)):
                    stack.append((item, (key, trail)))
        elif isinstance(value, list):
            stack.extend((item, (index, trail)) for index, item in enumerate(value)
                         if isinstance(item, (dict, list, str)))
        elif isinstance(value, str) and not _is_text(value):
            return _place(trail) or "the request body"
    return None


def parse_json(raw: bytes) -> Body:
    """The body as an object, or BadRequest saying what is wrong with it."""
    if len(raw) > MAX_BODY_BYTES:
        raise too_large(len(raw))
    data = _loads(raw)
    if not isinstance(data, dict):
        raise BadRequest(f"The request body must be a JSON object, not {_kind(data)}.")
    hinted = (json.detect_encoding(raw) not in ("utf-8", "utf-8-sig")
              or any(hint in raw for hint in _SURROGATE_HINTS))
    where = _lone_surrogate(data) if hinted else None
    if where is not None:
        raise BadRequest(f"{where} holds a lone surrogate (a \\ud800-\\udfff escape without its pair), which is "
                         "not text. Send text as UTF-8, or escape a character beyond U+FFFF as a high-low "
                         "surrogate pair.", where)
    return Body(data)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "an infinite number"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _number(value: float | None) -> str:
    """A number in words as the app writes them: 1,048,576; 0.7; a whole number past a float's
    precision by its count of digits."""
    if isinstance(value, int) and abs(value) >= 10 ** 15:
        return f"a number of {len(str(abs(value))):,} digits"
    if value is not None and float(value).is_integer() and abs(value) < 10 ** 15:
        return f"{int(value):,}"
    return f"{value:g}"


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
        if isinstance(value, float) and not math.isfinite(value):
            raise self.wrong(key, "a finite number")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
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
            span = (f"from {_number(low)} to {_number(high)}" if low is not None and high is not None
                    else f"at least {_number(low)}" if low is not None else f"at most {_number(high)}")
            raise BadRequest(f"{self.name(key)} must be {span} (got {_number(value)}).", self.name(key))

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

    def objects(self, key: str, *, required: bool = False, at_most: int | None = None,
                what: str = "items") -> list[Body]:
        """An array of objects, each readable as a Body named by its index; a 400 when it holds
        more than at_most of them (what: how the words name them)."""
        found = self.items(key, required=required) or []
        if at_most is not None and len(found) > at_most:
            raise BadRequest(f"{self.name(key)} holds {len(found):,} {what}; at most {at_most:,} are accepted. "
                             f"Send fewer, or leave out the oldest.", self.name(key))
        bodies = []
        for index, item in enumerate(found):
            where = f"{self.name(key)}[{index}]"
            if not isinstance(item, dict):
                raise BadRequest(f"{where} must be an object, not {_kind(item)}.", where)
            bodies.append(Body(item, where))
        return bodies
