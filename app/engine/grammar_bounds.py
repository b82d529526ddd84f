"""How much grammar llama.cpp can hold: a JSON schema, and the GBNF made of it, checked before either is used.

llama-cpp-python's schema converter (llama_cpp/llama_grammar.py) writes every repetition out in full:
`maxLength: N` becomes N groups nested in one another, `minLength: N` N copies in a row, so the
grammar grows with the numbers in the schema, not with its size (minLength 10^8: a 184-byte schema,
1.5 GB of grammar). llama.cpp's parser then recurses once per nested group and its sampler once per
rule reference at the front of a rule; past its stack that is a SIGSEGV of the engine, not an error.
Measured on llama.cpp as vendored by llama-cpp-python 0.3.36 (the probe: a subprocess per grammar;
1 MB is the stack of a Windows thread, 8 MB Linux's main thread):

- nested groups: the parser refuses more than 1,000 optional groups nested in one another (its
  MAX_REPETITION_THRESHOLD) when it gets back up, but a deeper nesting overflows the stack first:
  at about 2,100 levels on 1 MB, 19,000 on 8 MB;
- a chain of rules each starting with the next: 8,000 held on 1 MB, 11,000 crashed (40,000 on 8 MB
  held and took 34 s to parse); an object's optional properties make such a chain, two links each;
- alternatives live at once (an enum's values, optional properties): each costs about 2 ms a token
  on a 262,144-token vocabulary (1,000: 1.9 s for the first token; 100,000 held the engine 145 s
  for 8 tokens);
- size: 1 MB of grammar parses in about 0.25 s, 4 MB in 1.1 s.

The bounds below stay well under all of these and hold what real schemas ask for (OpenAI's
structured outputs allow 1,000 enum values in all). Both checks are pure Python with no recursion,
so the API server runs the schema's before the engine sees the schema (app/server/schemas.py: it
converts nothing), and the llama.cpp backend runs both before llama.cpp parses a grammar
(app/engine/backends/llama/grammar.py), whichever path handed it over.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

# A repetition count (minLength, maxLength, minItems, maxItems, a pattern's {m,n}); llama.cpp's
# parser itself takes no more than 1,000 nested optional groups.
MAX_REPEAT = 1000
# Alternatives in one place: an enum's values, anyOf/oneOf branches, an object's properties.
MAX_CHOICES = 1000
# JSON levels of a schema (objects and lists, its values included): each level of a schema is
# about two, and the converter recurses in Python at each.
MAX_DEPTH = 100
# Keys and values in a schema, so that even checking it stays quick.
MAX_PARTS = 200_000
# The grammar's text.
MAX_GRAMMAR_BYTES = 1 << 20
# Groups nested in one another in GBNF (crash: ~2,100 on a 1 MB stack).
MAX_GROUP_DEPTH = 1024
# Rules (and groups) the sampler enters one inside another at the front of a rule (crash: ~9,000
# on a 1 MB stack).
MAX_LEFT_DEPTH = 4000

_REPEATS = ("maxLength", "minLength", "maxItems", "minItems")
_CHOICES = ("enum", "anyOf", "oneOf", "allOf", "properties", "type")
# Keywords whose value is a schema, a list of schemas, or a name -> schema map; any other value
# is data: enum and const values are spelt out in the grammar, the rest (descriptions, defaults,
# examples) only counted.
_ONE = frozenset(("additionalProperties", "items", "not", "contains", "if", "then", "else", "propertyNames",
                  "unevaluatedProperties", "unevaluatedItems", "additionalItems"))
_MANY = frozenset(("anyOf", "oneOf", "allOf", "prefixItems", "items"))
_NAMED = frozenset(("properties", "patternProperties", "$defs", "definitions", "dependentSchemas"))


@dataclass(frozen=True)
class TooBig:
    """A part of a schema or grammar past a bound: what it asks (in words), where, and the most allowed."""

    keyword: str  # the schema keyword ("maxLength", "enum") or what was measured ("nesting", "grammar")
    path: str  # where in the schema, "$.properties.name"; "$" for the whole
    what: str  # "maxLength 100,000", "enum of 100,000 values"
    most: str  # "1,000", "1,000 values"

    def words(self) -> str:
        return f"{self.what} at {self.path} is more than Kestrel's grammars can hold (at most {self.most})"


class GrammarTooBig(ValueError):
    """A grammar was not made, or not handed on, because a schema or the grammar is past a bound; says which."""


def schema_problem(schema: Any) -> TooBig | None:
    """The first part of a JSON schema past a bound, or None: it can be turned into a grammar."""
    return SchemaWalk().problem(schema)


def shown_path(path: str) -> str:
    """A path short enough for a message: a deep one keeps its start and its end."""
    return path if len(path) <= 120 else f"{path[:50]}…{path[-60:]}"


# --- the schema ------------------------------------------------------------------------------------------------

class _Part(Enum):
    """What a value in a schema is: a schema, a value the grammar spells out (enum, const), or other data."""

    SCHEMA = 1
    LITERAL = 2
    DATA = 3


def _inner(part: _Part, key: str, value: Any) -> _Part:
    """What the value under key is, inside a part of this kind."""
    if part is not _Part.SCHEMA:
        return part
    if key in _ONE or (key in _MANY and isinstance(value, list)):
        return _Part.SCHEMA
    return _Part.LITERAL if key in ("enum", "const") else _Part.DATA


class SchemaWalk:
    """Schemas walked with a stack of their own (a schema 100,000 levels deep is only data here);
    those walked by one SchemaWalk share its bounds of size, as the tools of one call grammar do."""

    def __init__(self) -> None:
        self.parts = 0
        self.estimate = 0  # bytes of grammar the converter would write, roughly

    def problem(self, schema: Any) -> TooBig | None:
        """The first part of this schema past a bound (counting what was walked before), or None."""
        # (value, where, how deep, what it is, the length of the rule name the converter gives it)
        stack: list[tuple[Any, str, int, _Part, int]] = [(schema, "$", 1, _Part.SCHEMA, 4)]
        while stack:
            value, path, depth, part, name = stack.pop()
            if not isinstance(value, (dict, list)):
                if part is _Part.LITERAL:
                    self.estimate += len(value) + 4 if isinstance(value, str) else 8
                continue
            if depth > MAX_DEPTH:
                return TooBig("nesting", shown_path(path), f"nesting deeper than {MAX_DEPTH} levels",
                              f"{MAX_DEPTH} levels")
            self.parts += len(value)
            if self.parts > MAX_PARTS:
                return TooBig("size", "$", f"a schema of more than {MAX_PARTS:,} keys and values", f"{MAX_PARTS:,}")
            if isinstance(value, list):
                stack.extend((item, f"{path}[{index}]", depth + 1, part, name + 4) for index, item in enumerate(value))
                continue
            if part is _Part.SCHEMA:
                problem = self._schema(value, path, name)
                if problem is not None:
                    return problem
            for key, item in value.items():
                child = _child_path(path, str(key))
                if part is _Part.LITERAL:
                    self.estimate += len(str(key)) + 4
                    stack.append((item, child, depth + 1, part, name))
                elif part is _Part.SCHEMA and key in _NAMED and isinstance(item, dict):
                    self.parts += len(item)
                    stack.extend((sub, _child_path(child, str(sub_name)), depth + 2, _Part.SCHEMA,
                                  name + len(str(sub_name)) + 1) for sub_name, sub in item.items())
                else:
                    stack.append((item, child, depth + 1, _inner(part, str(key), item), name + 5))
            if self.estimate > MAX_GRAMMAR_BYTES:
                return TooBig("grammar", "$", f"a grammar of more than {self.estimate:,} bytes",
                              f"{MAX_GRAMMAR_BYTES:,} bytes")
        return None

    def _schema(self, schema: dict[str, Any], path: str, name: int) -> TooBig | None:
        """One (sub)schema's own keywords; name: the length of the rule name the converter gives it."""
        self.estimate += 3 * (name + 12)
        for keyword in _REPEATS:
            count = _number(schema.get(keyword))
            if count is not None and count > MAX_REPEAT:
                return TooBig(keyword, shown_path(path), f"{keyword} {_count(count)}", f"{MAX_REPEAT:,}")
        for keyword in _CHOICES:
            choices = schema.get(keyword)
            if isinstance(choices, (list, dict)) and len(choices) > MAX_CHOICES:
                noun = "properties" if keyword == "properties" else "values" if keyword == "enum" else "choices"
                return TooBig(keyword, shown_path(path), f"{keyword} of {len(choices):,} {noun}",
                              f"{MAX_CHOICES:,} {noun}")
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            repeat = _largest_repeat(pattern)
            if repeat > MAX_REPEAT:
                return TooBig("pattern", shown_path(path), f"a repeat of {_count(repeat)} in pattern", f"{MAX_REPEAT:,}")
            self.estimate += 4 * len(pattern) + 12 * repeat
        self.estimate += self._repeats(schema, name)
        return None

    @staticmethod
    def _repeats(schema: dict[str, Any], name: int) -> int:
        """The bytes the converter writes out for this schema's own repetitions."""
        low, high = ("minLength", "maxLength") if "items" not in schema else ("minItems", "maxItems")
        least = _within(schema.get(low))
        most = max(least, _within(schema.get(high)))
        unit = 8 if "items" not in schema else name + 14
        return unit * most


def _number(value: Any) -> int | float | None:
    """value as a count; None for what is no count (not a number, true or false, NaN)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
        return value
    return None


def _within(value: Any) -> int:
    """A count as a whole number from 0 to MAX_REPEAT (-inf, NaN and what is no number: 0)."""
    count = _number(value)
    return int(min(max(count, 0), MAX_REPEAT)) if count is not None else 0


def _count(value: int | float) -> str:
    return f"{value:,}" if isinstance(value, int) or value < 1e18 and value == int(value) else f"{value:g}"


def _child_path(path: str, key: str) -> str:
    return f"{path}.{key}" if re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$-]*", key) else f"{path}[{key!r}]"


_QUANTIFIER = re.compile(r"\{\s*(\d*)\s*(?:,\s*(\d*)\s*)?\}")


def _largest_repeat(pattern: str) -> int:
    """The largest count in the pattern's {m}, {m,} and {m,n} (escapes and [classes] skipped)."""
    largest = 0
    at = 0
    while at < len(pattern):
        char = pattern[at]
        if char == "\\":
            at += 2
        elif char == "[":
            at += 1
            while at < len(pattern) and pattern[at] != "]":
                at += 2 if pattern[at] == "\\" else 1
            at += 1
        elif char == "{" and (match := _QUANTIFIER.match(pattern, at)) is not None:
            for digits in match.groups():
                if digits:
                    # More digits than any bound has: no need to read a 5,000-digit number.
                    largest = max(largest, int(digits) if len(digits) <= 9 else 10**9)
            at = match.end()
        else:
            at += 1
    return largest
