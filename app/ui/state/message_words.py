"""A message in words: who wrote it, its attachments and sources as labels, what a screen reader hears."""

from __future__ import annotations

from app.core.attachments import AttachedFile, AttachedImage, SourceRef
from app.core.conversation import Message, Role
from app.core.units import human_size


def author_of(message: Message) -> str:
    """Who a message is from, as its label says. A system message (in chats imported
    before such messages became the chat's system prompt) is instructions, not Kestrel."""
    return {Role.USER: "You", Role.SYSTEM: "System prompt"}.get(message.role, "Kestrel")


def attachment_label(file: AttachedFile) -> str:
    """'report.pdf · 12 pages' for a PDF, 'notes.md · 4.0 KB' for another file."""
    pages = {section.page for section in file.sections if section.page is not None}
    if file.kind == "pdf" and pages:
        count = max(pages)
        return f"{file.name} · {count} page{'' if count == 1 else 's'}"
    return f"{file.name} · {human_size(file.size)}"


def source_name(source: SourceRef) -> str:
    """The source's file name, whichever system's separators its path has."""
    return AttachedFile(source.path, "", 0, ()).name


def source_label(source: SourceRef) -> str:
    """'[1] report.pdf, p. 12' (no page for a file without pages)."""
    page = f", p. {source.page}" if source.page is not None else ""
    return f"[{source.number}] {source_name(source)}{page}"


def documents_said(message: Message) -> str:
    """What a screen reader hears after a message's text: its chips, which are painted."""
    if message.role == Role.USER and (message.attachments or message.images):
        names = [image.name for image in message.images] + [file.name for file in message.attachments]
        return " (attached: " + ", ".join(names) + ")"
    if message.sources:
        return " (sources: " + "; ".join(source_label(source) for source in message.sources) + ")"
    return ""


def image_size_words(image: AttachedImage) -> str:
    """'1536 x 1024': the image as the model is given it."""
    return f"{image.width} x {image.height}"
