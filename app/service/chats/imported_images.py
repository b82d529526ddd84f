"""An imported chat's images, each put through the image check a chat's own images had, before the chat is stored."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from app.core.attachments import AttachedImage
from app.core.chat_export import ImportedChat
from app.documents.image_check import ImageRefusal, PastedImage
from app.service.documents.attached_images import CheckImages, checked_in_turn


@dataclass(frozen=True)
class CheckedChat:
    """The chat with each image as the check wrote it again (its real width and height), and
    the words for those it refused, which were left out ("" when none was)."""

    chat: ImportedChat
    left_out: str = ""


def check_imported_images(chat: ImportedChat, check: CheckImages) -> CheckedChat:
    """Each image of `chat` checked in the image check's child (one check at a time, as the
    window's): a file's images were only bounded and their first bytes looked at, and the window
    and the engine would decode them as they are. RuntimeError when the check could not start.
    Blocks: call off the loop."""
    found = [(number, image) for number, message in enumerate(chat.messages) for image in message.images]
    if not found:
        return CheckedChat(chat)
    results = checked_in_turn([PastedImage(image.data, image.name) for _, image in found], check)
    kept: dict[int, list[AttachedImage]] = {}
    refused: list[tuple[int, ImageRefusal]] = []
    for (number, image), result in zip(found, results, strict=True):
        if isinstance(result, ImageRefusal):
            refused.append((number, result))
        else:
            kept.setdefault(number, []).append(dataclasses.replace(result, note=result.note or image.note))
    messages = tuple(dataclasses.replace(message, images=tuple(kept.get(number, ()))) if message.images else message
                     for number, message in enumerate(chat.messages))
    return CheckedChat(dataclasses.replace(chat, messages=messages), _left_out(refused))


def _left_out(refused: list[tuple[int, ImageRefusal]]) -> str:
    if not refused:
        return ""
    each = "; ".join(f"{item.name} in message {number + 1} ({item.reason})" for number, item in refused)
    if len(refused) == 1:
        return f"1 image could not be used and was left out: {each}."
    return f"{len(refused)} images could not be used and were left out: {each}."
