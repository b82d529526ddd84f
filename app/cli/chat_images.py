"""`kestrel chat --image`: images checked in the image check's child process before the model loads, and a model that cannot see them refused in words."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from app.cli.terminal_text import terminal_line, terminal_text
from app.cli.user_error import EXIT_MODEL, UserError
from app.core.attachments import AttachedImage
from app.engine.protocol import Loaded
from app.library.installed import InstalledModel
from app.service.documents.attached_images import CheckImages, ImagesUnreadable, check_images, in_worker

EXIT_UNREADABLE = 3  # as for --attach: an image cannot be used (each named, with why; nothing is sent)


def chat_images(given: Sequence[str], check: CheckImages = in_worker) -> tuple[AttachedImage, ...]:
    """The images after --image, checked in the image check's child process (one that crashes or
    hangs a decoder is refused, never this process); UserError names each one refused, or says
    the check could not start. What the check changed (scaled down) goes to standard error."""
    if not given:
        return ()
    try:
        images = check_images([Path(path).expanduser().absolute() for path in given], check)
    except ImagesUnreadable as exc:
        raise UserError(terminal_text(str(exc)), EXIT_UNREADABLE) from None
    for image in images:
        if image.note:
            print(f"kestrel: {terminal_line(image.name)}: {image.note}", file=sys.stderr)
    return images


def refuse_without_vision(model: InstalledModel) -> None:
    """Before the model loads: one the library has no vision projector for cannot take --image."""
    if not model.vision:
        raise UserError(f"{terminal_line(model.title)} cannot see images: it has no vision projector. Use a model "
                        "that does with --model, such as Gemma 3 4B (kestrel models catalog lists the models "
                        "tagged Vision; kestrel models get downloads one), or leave out --image.", EXIT_MODEL)


def refuse_unseeing(model: InstalledModel, loaded: Loaded | None) -> None:
    """Once it loaded: its projector must have loaded too (the engine says why not)."""
    if loaded is not None and not loaded.vision:
        why = loaded.vision_problem or f"{terminal_line(model.title)}'s vision projector did not load."
        raise UserError(f"{terminal_text(why)} The images were not sent: leave out --image, or use another model "
                        "that sees images with --model.", EXIT_MODEL)
