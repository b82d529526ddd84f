"""A message's images in the history's message_images table: written with the message, read with it."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import replace

from app.core.attachments import AttachedImage
from app.core.conversation import Message, Role
from app.core.image_data import checked_image, checked_images

_COLUMNS = "message_id, position, name, mime, width, height, note, data"


def images_for(role: Role, images: Sequence[AttachedImage]) -> tuple[AttachedImage, ...]:
    """The images checked for keeping; ValueError (a bug) if one is wrong or `role` is no user's."""
    if images and role != Role.USER:
        raise ValueError(f"a {role.value} message has no images: only the user attaches them.")
    return checked_images(images)


def store_images(conn: sqlite3.Connection, message_id: int, images: Sequence[AttachedImage]) -> None:
    """Write a message's images (checked already), in order, inside the caller's transaction."""
    conn.executemany(
        f"INSERT INTO message_images ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [(message_id, position, image.name, image.mime, image.width, image.height, image.note, image.data)
         for position, image in enumerate(images)])


def with_images(conn: sqlite3.Connection, messages: list[Message], *, conversation_id: int | None = None) -> list[Message]:
    """The messages with their images (user messages only). conversation_id: all of them are that
    chat's, read with one query; else each message's are read by its id."""
    users = {message.id for message in messages if message.role == Role.USER}
    if not users:
        return messages
    if conversation_id is not None:
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM message_images WHERE message_id IN"
            " (SELECT id FROM messages WHERE conversation_id = ?) ORDER BY message_id, position",
            (conversation_id,)).fetchall()
    else:
        marks = ", ".join("?" * len(users))
        rows = conn.execute(f"SELECT {_COLUMNS} FROM message_images WHERE message_id IN ({marks})"
                            " ORDER BY message_id, position", tuple(users)).fetchall()
    found: dict[int, list[AttachedImage]] = {}
    for row in rows:
        image = image_from_row(tuple(row)[2:])
        if image is not None and row[0] in users:
            found.setdefault(row[0], []).append(image)
    if not found:
        return messages
    return [replace(message, images=tuple(found[message.id])) if message.id in found else message
            for message in messages]


def image_from_row(row: tuple[object, ...]) -> AttachedImage | None:
    """An image from a row's (name, mime, width, height, note, data); None for one this code
    would not write (a row another program wrote, or damage): it is left out, not shown broken."""
    name, mime, width, height, note, data = row
    if not isinstance(data, bytes):
        return None
    try:
        return checked_image(AttachedImage(name, mime, width, height, data, note or ""),  # type: ignore[arg-type]
                             "a stored image")
    except (ValueError, TypeError):
        return None
