"""Images attached to a message, checked as the history keeps them and as a chat export carries them (base64)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

from app.core.attachment_data import line_field, text_field
from app.core.attachments import IMAGE_MIMES, MAX_IMAGE_BYTES, MAX_IMAGES, AttachedImage, image_type

# An image's name: a file's name (the path is not kept: an image is kept whole, unlike a
# document, so where it came from does not matter); a note: one line or two.
MAX_NAME = 1_000
MAX_NOTE = 1_000
# The check scales the long side to 1536 px; an imported image may be larger, never absurd.
MAX_SIDE = 100_000
# Base64 of MAX_IMAGE_BYTES, with room for line breaks some encoders add: longer is refused unread.
_MAX_BASE64 = (MAX_IMAGE_BYTES + 2) // 3 * 4 + MAX_IMAGE_BYTES // 38 + 16


def checked_image(image: AttachedImage, where: str) -> AttachedImage:
    """The image as the history keeps it; ValueError in words naming `where` if a field is wrong."""
    if not isinstance(image, AttachedImage):
        raise ValueError(f"{where} is not an image.")
    name = line_field(image.name, f"{where}'s name", MAX_NAME)
    note = text_field(image.note, f"{where}'s note")
    if len(note) > MAX_NOTE:
        raise ValueError(f"{where}'s note is {len(note):,} characters long; at most {MAX_NOTE:,} can be kept.")
    for side, value in (("width", image.width), ("height", image.height)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SIDE:
            raise ValueError(f"{where}'s {side} must be a whole number from 1 to {MAX_SIDE:,} (got {value!r}).")
    if image.mime not in IMAGE_MIMES:
        raise ValueError(f"{where} is of type {str(image.mime)[:60]!r}; only {' and '.join(IMAGE_MIMES)} are kept.")
    data = image.data
    if not isinstance(data, bytes):
        raise ValueError(f"{where}'s data must be bytes.")
    if len(data) > MAX_IMAGE_BYTES:
        raise ValueError(f"{where} is {len(data):,} bytes; at most {MAX_IMAGE_BYTES:,} can be kept.")
    if image_type(data) != image.mime:
        raise ValueError(f"{where}'s data is not a {image.mime.removeprefix('image/').upper()} image "
                         "(its first bytes say otherwise).")
    return AttachedImage(name, image.mime, image.width, image.height, data, note)


def checked_images(images: Sequence[AttachedImage], where: str = "the message") -> tuple[AttachedImage, ...]:
    """The images as the history keeps them; ValueError (a bug in the code that made them: the
    check refuses what would not do) if there are too many or one is wrong."""
    if len(images) > MAX_IMAGES:
        raise ValueError(f"{where} has {len(images)} images; at most {MAX_IMAGES} can be kept.")
    return tuple(checked_image(image, f"{where}'s image {number}") for number, image in enumerate(images, start=1))


def images_to_data(images: Sequence[AttachedImage]) -> list[dict[str, Any]]:
    """The images as an export's JSON values: {"name", "mime", "width", "height", "note", "data" (base64)}."""
    return [{"name": image.name, "mime": image.mime, "width": image.width, "height": image.height,
             "note": image.note, "data": base64.b64encode(image.data).decode("ascii")} for image in images]


def images_from_data(items: Any, where: str) -> tuple[AttachedImage, ...]:
    """Images from an export's JSON values, each checked before its data is decoded; ValueError
    in words naming `where` ("message 3")."""
    if not isinstance(items, list):
        raise ValueError(f"{where}'s images must be a list.")
    if len(items) > MAX_IMAGES:
        raise ValueError(f"{where} has {len(items):,} images; at most {MAX_IMAGES} can be imported.")
    images: list[AttachedImage] = []
    for number, item in enumerate(items, start=1):
        at = f"{where}'s image {number}"
        if not isinstance(item, dict):
            raise ValueError(f"{at} is not an object.")
        encoded = item.get("data")
        if not isinstance(encoded, str):
            raise ValueError(f"{at}'s data must be a base64 text.")
        if len(encoded) > _MAX_BASE64:
            raise ValueError(f"{at} is larger than the {MAX_IMAGE_BYTES // 2**20} MB an image may be.")
        try:
            data = base64.b64decode(encoded.encode("ascii"), validate=False)
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raise ValueError(f"{at}'s data is not base64.") from None
        width, height = _whole(item.get("width"), f"{at}'s width"), _whole(item.get("height"), f"{at}'s height")
        mime = item.get("mime")
        if not isinstance(mime, str):
            raise ValueError(f"{at}'s mime must be a text.")
        image = AttachedImage(text_field(item.get("name"), f"{at}'s name"), mime, width, height, data,
                              text_field(item.get("note", ""), f"{at}'s note"))
        images.append(checked_image(image, at))
    return tuple(images)


def _whole(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be a whole number (got {repr(value)[:40]}).")
    return value
