"""Attached files, sources and a chat's collections as JSON: one form for the history and the export, checked."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from app.core.attachments import (
    MAX_ATTACHED_CHARS,
    MAX_ATTACHMENTS,
    MAX_SOURCES,
    AttachedFile,
    AttachedSection,
    SourceRef,
)

# A path: far above what any file system takes (Windows' long paths are 32,767 UTF-16 units).
MAX_PATH = 32_768
# A file's kind, a reader's note, a heading, a collection's name: shown on a line or two.
MAX_KIND = 40
MAX_NOTE = 1_000
MAX_HEADING = 1_000
MAX_COLLECTION_NAME = 1_000
# The collections one chat answers from: far above any real chat.
MAX_COLLECTIONS = 1_000
# A page number past any real PDF's, and a size past any file's (2**53: exact in JSON's numbers).
MAX_PAGE = 10_000_000
MAX_SIZE = 2**53
_CONTROL = re.compile("[\x00-\x1f\x7f]")
# A path or a folder's name may hold any character a file system takes (Linux takes a line
# break): only NUL, which none takes, is refused.
_NUL = re.compile("\x00")
_SURROGATE = re.compile("[\ud800-\udfff]")


def attachments_to_data(files: Sequence[AttachedFile]) -> list[dict[str, Any]]:
    """The files as JSON values: {"path", "kind", "size", "note", "sections": [{"text", "page", "heading"}]}."""
    return [{"path": file.path, "kind": file.kind, "size": file.size, "note": file.note,
             "sections": [{"text": section.text, "page": section.page, "heading": section.heading}
                          for section in file.sections]}
            for file in files]


def sources_to_data(sources: Sequence[SourceRef]) -> list[dict[str, Any]]:
    """The sources as JSON values: {"number", "path", "page", "heading", "text"}."""
    return [{"number": source.number, "path": source.path, "page": source.page, "heading": source.heading,
             "text": source.text} for source in sources]


def attachments_json(files: Sequence[AttachedFile]) -> str:
    """The files as the history stores them: compact JSON text ("[]" for none)."""
    return _compact(attachments_to_data(files))


def sources_json(sources: Sequence[SourceRef]) -> str:
    """The sources as the history stores them: compact JSON text ("[]" for none)."""
    return _compact(sources_to_data(sources))


def collections_json(names: Sequence[str]) -> str:
    """A chat's collections as the history stores them: compact JSON text ("[]" for none)."""
    return _compact(list(names))


def _compact(data: list[Any]) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def checked_attachments(files: Sequence[AttachedFile]) -> tuple[AttachedFile, ...]:
    """The files as the history will keep them (a lone surrogate, which UTF-8 cannot hold, made
    U+FFFD: a path from a file system in another encoding has them); ValueError if a field is
    wrong or past its limit: a bug in the code that made them, which had to refuse the file."""
    return attachments_from_data(attachments_to_data(files), "the message")


def checked_sources(sources: Sequence[SourceRef]) -> tuple[SourceRef, ...]:
    """The sources as the history will keep them; ValueError if one is wrong (a bug)."""
    return sources_from_data(sources_to_data(sources), "the answer")


def checked_collections(names: Sequence[str]) -> tuple[str, ...]:
    """The names as the history will keep them; ValueError if one is wrong (a bug)."""
    if isinstance(names, str):  # a str is a Sequence[str]: one name passed bare is a bug
        raise ValueError("the chat's collections must be a sequence of names, not one text.")
    return collections_from_data(list(names), "the chat")


def attachments_from_json(stored: object) -> tuple[AttachedFile, ...]:
    """Attached files from the history's column: () where there are none, or where what is
    stored is not what this code would write (a row another program wrote)."""
    return _lenient(stored, attachments_from_data)


def sources_from_json(stored: object) -> tuple[SourceRef, ...]:
    """An answer's sources from the history's column, as attachments_from_json."""
    return _lenient(stored, sources_from_data)


def collections_from_json(stored: object) -> tuple[str, ...]:
    """A chat's collections from the history's column, as attachments_from_json."""
    return _lenient(stored, collections_from_data)


def _lenient(stored: object, read: Any) -> Any:
    if not isinstance(stored, str) or stored == "[]":
        return ()
    try:
        return read(json.loads(stored), "the row")
    except (ValueError, RecursionError):
        return ()


def attachments_from_data(items: Any, where: str) -> tuple[AttachedFile, ...]:
    """Attached files from JSON values, every field checked; ValueError in words naming `where`
    (the message they belong to: "message 3"). Each file's text (its sections' texts together)
    is at most MAX_ATTACHED_CHARS, as when it was attached."""
    items = _list(items, f"{where}'s attachments", MAX_ATTACHMENTS)
    return tuple(_attached_file(item, f"{where}'s attachment {number}")
                 for number, item in enumerate(items, start=1))


def _attached_file(item: Any, where: str) -> AttachedFile:
    if not isinstance(item, dict):
        raise ValueError(f"{where} is not an object.")
    path = line_field(item.get("path"), f"{where}'s path", MAX_PATH, _NUL)
    kind = line_field(item.get("kind"), f"{where}'s kind", MAX_KIND)
    size = _number(item.get("size"), f"{where}'s size", 0, MAX_SIZE)
    note = text_field(item.get("note", ""), f"{where}'s note")
    if len(note) > MAX_NOTE:
        raise ValueError(f"{where}'s note is {len(note):,} characters long; at most {MAX_NOTE:,} can be kept.")
    raw = item.get("sections")
    if not isinstance(raw, list):
        raise ValueError(f"{where}'s sections must be a list.")
    # Checked before each section is made: a hostile file's million empty sections cost a count.
    if len(raw) > MAX_ATTACHED_CHARS:
        raise ValueError(f"{where} has {len(raw):,} sections; a file's text is at most {MAX_ATTACHED_CHARS:,} "
                         "characters.")
    sections: list[AttachedSection] = []
    total = 0
    for number, data in enumerate(raw, start=1):
        section = _section(data, f"{where}'s section {number}")
        total += len(section.text)
        if total > MAX_ATTACHED_CHARS:
            raise ValueError(f"{where} holds more than {MAX_ATTACHED_CHARS:,} characters of text; "
                             "at most that much of one file can be kept.")
        sections.append(section)
    return AttachedFile(path, kind, size, tuple(sections), note)


def _section(item: Any, where: str) -> AttachedSection:
    if not isinstance(item, dict):
        raise ValueError(f"{where} is not an object.")
    return AttachedSection(text_field(item.get("text"), f"{where}'s text"), _page(item.get("page"), f"{where}'s page"),
                           _heading(item.get("heading"), f"{where}'s heading"))


def sources_from_data(items: Any, where: str) -> tuple[SourceRef, ...]:
    """An answer's sources from JSON values, every field checked; ValueError in words naming
    `where`. Numbers are unique (each is the [n] the answer cites)."""
    items = _list(items, f"{where}'s sources", MAX_SOURCES)
    sources: list[SourceRef] = []
    numbers: set[int] = set()
    for position, item in enumerate(items, start=1):
        at = f"{where}'s source {position}"
        if not isinstance(item, dict):
            raise ValueError(f"{at} is not an object.")
        number = _number(item.get("number"), f"{at}'s number", 1, MAX_PAGE)
        if number in numbers:
            raise ValueError(f"{where} has two sources numbered {number}.")
        numbers.add(number)
        text = text_field(item.get("text"), f"{at}'s text")
        if len(text) > MAX_ATTACHED_CHARS:
            raise ValueError(f"{at}'s text is {len(text):,} characters long; at most {MAX_ATTACHED_CHARS:,} "
                             "can be kept.")
        path = line_field(item.get("path"), f"{at}'s path", MAX_PATH, _NUL)
        sources.append(SourceRef(number, path, _page(item.get("page"), f"{at}'s page"),
                                 _heading(item.get("heading"), f"{at}'s heading"), text))
    return tuple(sources)


def collections_from_data(items: Any, where: str) -> tuple[str, ...]:
    """A chat's collection names from JSON values: non-empty texts, none twice; ValueError
    in words naming `where`."""
    items = _list(items, f"{where}'s collections", MAX_COLLECTIONS)
    names: list[str] = []
    for number, item in enumerate(items, start=1):
        name = line_field(item, f"{where}'s collection {number}", MAX_COLLECTION_NAME, _NUL)
        if name in names:
            raise ValueError(f"{where} names the collection {name!r} twice.")
        names.append(name)
    return tuple(names)


def _list(items: Any, what: str, limit: int) -> list[Any]:
    if not isinstance(items, list):
        raise ValueError(f"{what} must be a list.")
    if len(items) > limit:
        raise ValueError(f"{what} are {len(items):,}; at most {limit:,} can be kept.")
    return items


def text_field(value: Any, what: str) -> str:
    """A text (lone surrogates replaced, so SQLite and JSON take it); ValueError naming `what` otherwise."""
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a text (got {type(value).__name__}).")
    return _SURROGATE.sub("\ufffd", value)


def line_field(value: Any, what: str, limit: int, refused: re.Pattern[str] = _CONTROL) -> str:
    """A non-empty text, at most `limit` characters, without the characters `refused` finds
    (by default: one line of text)."""
    text = text_field(value, what)
    if not text:
        raise ValueError(f"{what} must not be empty.")
    if len(text) > limit:
        raise ValueError(f"{what} is {len(text):,} characters long; at most {limit:,} can be kept.")
    if refused.search(text):
        said = "a NUL character" if refused is _NUL else "a control character: it must be one line"
        raise ValueError(f"{what} holds {said}.")
    return text


def _heading(value: Any, what: str) -> str | None:
    if value is None:
        return None
    heading = text_field(value, what)
    if len(heading) > MAX_HEADING:
        raise ValueError(f"{what} is {len(heading):,} characters long; at most {MAX_HEADING:,} can be kept.")
    return heading


def _page(value: Any, what: str) -> int | None:
    return None if value is None else _number(value, what, 1, MAX_PAGE)


def _number(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{what} must be a whole number from {low:,} to {high:,} (got {_shown(value)}).")
    return value


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"
