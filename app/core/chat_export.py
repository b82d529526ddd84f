"""A chat as a file: Markdown to read, JSON (format "kestrel-chat", versions 1 to 4) to import back.

Pure functions over Conversation and Message values: the service layer reads the history
and writes the file. Import trusts nothing in the file: every field is checked, and a
file that is too big is refused before it is read. Version 2 adds an answer's parts (its
tool calls and results); version 3 the files attached to the user's messages (with their
text), an answer's sources and the chat's collections; version 4 the images attached to the
user's messages (base64, app/core/image_data.py). A chat is written in the lowest version
that holds what it has, so a chat without documents still imports into a Kestrel that reads
only versions 1 and 2.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.core.answer_stats import AnswerStats
from app.core.attachment_data import (
    attachments_from_data,
    attachments_to_data,
    collections_from_data,
    sources_from_data,
    sources_to_data,
)
from app.core.chat_markdown import markdown_attachments, markdown_images, markdown_parts, markdown_sources
from app.core.conversation import Conversation, Message, MessageState, Role
from app.core.files import FileTooBig, NotAFile, read_chosen_file
from app.core.generation import GenerationSettings
from app.core.image_data import images_from_data, images_to_data
from app.core.message_parts import parts_from_data, parts_to_data

FORMAT = "kestrel-chat"
VERSION = 4
# The version that first had parts, the one that first had documents, and the one that first
# had images; a chat with none of them is written as version 1.
_PARTS_SINCE = 2
_DOCUMENTS_SINCE = 3
_IMAGES_SINCE = 4
# Far above any real chat (2,000 long messages are a few MB; a checked image is at most about
# 2 MB as base64, so a chat with a hundred of them fits) and small enough to read into memory.
MAX_BYTES = 256 * 1024 * 1024
MAX_MESSAGES = 100_000
_ROLE_HEADINGS = {Role.USER: "You", Role.ASSISTANT: "Assistant", Role.SYSTEM: "System prompt"}
_SCALARS = (str, int, float, bool, type(None))
_SURROGATE = re.compile("[\ud800-\udfff]")


class ChatFileError(Exception):
    """A chat file cannot be imported; the message names the file and what is wrong."""


@dataclass(frozen=True)
class ImportedChat:
    """A chat read from an export: its conversation (id 0) and messages (ids 0)."""

    conversation: Conversation
    messages: tuple[Message, ...]


def to_json(conversation: Conversation, messages: list[Message]) -> str:
    """The chat in Kestrel's JSON export format: standard JSON, so a number it cannot hold
    (an infinite speed a hand-made import once stored) is written as null."""
    return json.dumps(chat_data(conversation, messages), ensure_ascii=False, indent=1, allow_nan=False)


def chat_data(conversation: Conversation, messages: list[Message]) -> dict[str, Any]:
    """The chat as the JSON export's object (a .kestrel-project file holds one per chat)."""
    with_documents = bool(conversation.collections) or any(m.attachments or m.sources for m in messages)
    version = (_IMAGES_SINCE if any(m.images for m in messages) else _DOCUMENTS_SINCE if with_documents
               else _PARTS_SINCE if any(m.parts for m in messages) else 1)
    return _finite({
        "format": FORMAT, "version": version, "title": conversation.title,
        "system_prompt": conversation.system_prompt, "settings": conversation.settings.to_dict(),
        "model": conversation.model, "created": conversation.created, "updated": conversation.updated,
        **({"collections": list(conversation.collections)} if conversation.collections else {}),
        "messages": [{"role": m.role.value, "text": m.text, "thinking": m.thinking, "stats": _stats_of(m),
                      "created": m.created, "state": _exported_state(m.state),
                      **({"parts": parts_to_data(m.parts)} if m.parts else {}),
                      **({"attachments": attachments_to_data(m.attachments)} if m.attachments else {}),
                      **({"images": images_to_data(m.images)} if m.images else {}),
                      **({"sources": sources_to_data(m.sources)} if m.sources else {})} for m in messages],
    })


def whole_title(conversation: Conversation, messages: list[Message]) -> str:
    """The chat's title as a heading: whole. A title the chat was named with from its first message is
    that line cut to fit the chat list ("What is the capital of Australia and why was i…"); the export
    has room for all of it. A title the person gave is theirs, as they wrote it (on one line)."""
    title = " ".join(conversation.title.split())
    first = next((m.text.strip() for m in messages if m.role == Role.USER and m.text.strip()), "")
    line = " ".join(first.splitlines()[0].split()) if first else ""
    cut = title.removesuffix("…").rstrip()
    if title.endswith("…") and cut and line.startswith(cut) and len(line) > len(cut):
        return line
    return title


def to_markdown(conversation: Conversation, messages: list[Message]) -> str:
    """The chat as a Markdown document to read or share (not imported back)."""
    lines = [f"# {whole_title(conversation, messages)}", "",
             f"*Exported from Kestrel · started {_when(conversation.created)}"
             + (f" · model {conversation.model}" if conversation.model else "") + "*", ""]
    if conversation.system_prompt.strip():
        lines += ["> **System prompt:** " + conversation.system_prompt.strip().replace("\n", "\n> "), ""]
    for message in messages:
        heading = _ROLE_HEADINGS[message.role]
        if message.state != MessageState.COMPLETE:
            heading += " (interrupted)"
        lines += [f"## {heading}", ""]
        if message.thinking.strip():
            lines += ["<details><summary>Thinking</summary>", "", message.thinking.strip(), "", "</details>", ""]
        lines += markdown_parts(message.parts) if message.parts else [message.text, ""]
        lines += (markdown_attachments(message.attachments) + markdown_images(message.images)
                  + markdown_sources(message.sources))
    return "\n".join(lines)


def read_chat(path: Path) -> ImportedChat:
    """Read and check a JSON export; ChatFileError saying what is wrong with it."""
    try:
        raw = _read_regular_file(path)
    except OSError as exc:
        raise ChatFileError(f"{path} could not be read ({exc.strerror or exc}).") from exc
    if len(raw) > MAX_BYTES:
        raise ChatFileError(f"{path} is too big to be a Kestrel chat.")
    try:
        # utf-8-sig: Notepad and PowerShell begin UTF-8 with a byte-order mark.
        data = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ChatFileError(f"{path} is not a Kestrel chat export: it is not valid JSON.") from exc
    try:
        return _chat_from(data)
    except ValueError as exc:
        raise ChatFileError(f"{path} cannot be imported: {exc}") from exc


def chat_from_data(data: Any) -> ImportedChat:
    """A chat from the JSON export's object, every field checked; ValueError saying what is wrong."""
    return _chat_from(data)


def _read_regular_file(path: Path) -> bytes:
    """Up to MAX_BYTES + 1 bytes of path; ChatFileError if it is no regular file or too big."""
    try:
        return read_chosen_file(path, MAX_BYTES)
    except NotAFile as exc:
        raise ChatFileError(f"{path} is not a file (it is {exc.kind}): choose a JSON export of a chat.") from None
    except FileTooBig as exc:
        raise ChatFileError(f"{path} is too big to be a Kestrel chat ({_over_the_limit(exc.size)}).") from None


def _chat_from(data: Any) -> ImportedChat:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError('it is not a Kestrel chat export (no "format": "kestrel-chat").')
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version > VERSION or version < 1:
        raise ValueError(f"it has export version {version!r}; this Kestrel reads versions 1 to {VERSION}. "
                         "Update Kestrel to import it.")
    now = time.time()
    created = _time(data.get("created", now), "created")
    title = _text(data.get("title", "Imported chat"), "title").strip()[:200] or "Imported chat"
    settings = data.get("settings", {})
    if not isinstance(settings, dict):
        raise ValueError("settings must be an object.")
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise ValueError("model must be a text or null.")
    items = data.get("messages")
    if not isinstance(items, list):
        raise ValueError("messages must be a list.")
    if len(items) > MAX_MESSAGES:
        raise ValueError(f"it has {len(items):,} messages; at most {MAX_MESSAGES:,} can be imported.")
    messages = [_message(item, number, created, version) for number, item in enumerate(items, start=1)]
    # Kestrel keeps a chat's instructions in its system prompt, which the model reads and
    # Chat settings shows; a system message kept as a message would show as Kestrel
    # speaking and never reach the model. Other tools' exports put them in messages.
    system_prompt = _text(data.get("system_prompt", ""), "system_prompt")
    if system_texts := [m.text.strip() for m in messages if m.role == Role.SYSTEM and m.text.strip()]:
        system_prompt = "\n\n".join(text for text in (system_prompt.strip(), *system_texts) if text)
    # Version 2 had no collections: as for parts, a key of that name in an older file is not Kestrel's.
    collections = collections_from_data(data.get("collections", []), "the chat") if version >= _DOCUMENTS_SINCE else ()
    conversation = Conversation(0, title, created, now, system_prompt,
                                GenerationSettings.from_dict(settings).validated(), model, collections)
    return ImportedChat(conversation, tuple(m for m in messages if m.role != Role.SYSTEM))


def _message(item: Any, number: int, default_time: float, version: int) -> Message:
    where = f"message {number}"
    if not isinstance(item, dict):
        raise ValueError(f"{where} is not an object.")
    try:
        # A chat keeps its tool results as parts of the answer that asked for them, never as
        # messages of their own (Role.TOOL is the API server's), so a file's are refused.
        role = Role(item.get("role"))
        if role == Role.TOOL:
            raise ValueError(role)
    except (ValueError, TypeError):
        raise ValueError(f"{where} has role {item.get('role')!r}; it must be user, assistant or system.") from None
    state = item.get("state", "complete")
    if state not in ("complete", "interrupted"):
        raise ValueError(f"{where} has state {state!r}; it must be complete or interrupted.")
    stats = item.get("stats")
    if stats is not None and not (isinstance(stats, dict) and all(
            isinstance(key, str) and isinstance(value, _SCALARS) for key, value in stats.items())):
        raise ValueError(f"{where} has stats that are not an object of plain values.")
    if stats is not None:  # 1e400 reads as infinity: no speed or time, so it is left out
        stats = {key: value for key, value in stats.items()
                 if not (isinstance(value, float) and not math.isfinite(value))}
    # Version 1 had no parts: a key of that name in such a file is not Kestrel's, and left alone.
    parts = parts_from_data(item.get("parts", []), where) if version >= _PARTS_SINCE else ()
    if parts and role != Role.ASSISTANT:
        raise ValueError(f"{where} is a {role.value} message with parts; only an assistant's answer has them.")
    documents = version >= _DOCUMENTS_SINCE
    files = attachments_from_data(item.get("attachments", []), where) if documents else ()
    if files and role != Role.USER:
        raise ValueError(f"{where} ({role.value}) has attachments; only the user's messages have them.")
    sources = sources_from_data(item.get("sources", []), where) if documents else ()
    if sources and role != Role.ASSISTANT:
        raise ValueError(f"{where} ({role.value}) has sources; only an assistant's answer has them.")
    # Version 3 and before had no images: as for parts, such a file's key of that name is not Kestrel's.
    images = images_from_data(item.get("images", []), where) if version >= _IMAGES_SINCE else ()
    if images and role != Role.USER:
        raise ValueError(f"{where} ({role.value}) has images; only the user's messages have them.")
    return Message(0, 0, role, _text(item.get("text"), f"{where}'s text"),
                   _time(item.get("created", default_time), f"{where}'s created"), MessageState(state),
                   None if stats is None else AnswerStats.from_dict(stats),
                   _text(item.get("thinking", ""), f"{where}'s thinking"), parts, files, sources, images)



def _finite(value: Any) -> Any:
    """value with every NaN and infinity (which JSON cannot hold) made None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def _over_the_limit(size: int) -> str:
    """The size and the limit, in numbers that differ: bytes where MiB would read the same."""
    if f"{size / 2**20:.1f}" == f"{MAX_BYTES / 2**20:.1f}":
        return f"{size:,} bytes; the limit is {MAX_BYTES // 2**20} MiB, {MAX_BYTES:,} bytes"
    return f"{size / 2**20:,.1f} MiB; the limit is {MAX_BYTES // 2**20} MiB"


def _stats_of(message: Message) -> dict[str, Any] | None:
    # The export's stats are what the history stores: AnswerStats' dict, read back by
    # AnswerStats.from_dict, so a file from an older Kestrel imports too.
    return None if message.stats is None else message.stats.to_dict()


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a text (got {type(value).__name__}).")
    # A lone surrogate (valid in JSON's \\u escapes) cannot be stored as UTF-8.
    return _SURROGATE.sub("\ufffd", value)


# 9999-12-31 23:59:59 UTC: later times are no date a clock can show (time.localtime overflows).
_LAST_TIME = 253_402_300_799


def _time(value: Any, what: str) -> float:
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0
            or value > _LAST_TIME):
        raise ValueError(f"{what} must be a time in seconds (got {value!r}).")
    return float(value)


def _exported_state(state: MessageState) -> str:
    # An answer still being written is exported as it stands, cut short.
    return "complete" if state == MessageState.COMPLETE else "interrupted"


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch))
