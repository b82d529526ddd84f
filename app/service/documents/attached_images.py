"""Images attached in a chat: each checked in the image worker's child process into what the history keeps,
and which of a chat's images go in a prompt (the rule both the prompt and the context's fit follow)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from app.core.attachments import MAX_IMAGES, AttachedImage
from app.core.conversation import Message, MessageState, Role
from app.documents.image_check import PASTED, READ_TYPES, ImageInput, ImageProblem, ImageRefusal, ImageResult, PastedImage

CheckImages = Callable[[Sequence[ImageInput]], Iterator[ImageResult]]

# As many images as the engine takes in one prompt (app/engine/backends/llama/image_prompt.py MAX_IMAGES; a test
# holds them equal: the service does not import the engine's native side).
PROMPT_IMAGES = 16
# A model without vision answering a chat where images were sent earlier (to another model), or
# a turn too old for its images to fit in the prompt with the newer ones.
UNSEEN = "(The user attached images here ({names}), which you cannot see.)"


def turns_with_images(history: Sequence[Message], *, see_images: bool = True) -> frozenset[int]:
    """The positions in history of the turns whose images go to the model: none when it cannot
    see them; else the newest turns whose images fit in one prompt together (PROMPT_IMAGES), a
    turn's all or none, and from the first turn that would not fit on, none (so what is shown is
    the recent stretch). The one rule for what is sent (answer_run.chat_of) and what the
    context's fit counts (document_context), so the two cannot drift apart."""
    if not see_images:
        return frozenset()
    shown: set[int] = set()
    count = 0
    for number in range(len(history) - 1, -1, -1):
        message = history[number]
        if (not message.images or message.parts or message.role == Role.SYSTEM
                or message.state == MessageState.STREAMING):
            continue
        if count + len(message.images) > PROMPT_IMAGES:
            break
        count += len(message.images)
        shown.add(number)
    return frozenset(shown)


def unseen_note(images: Sequence[AttachedImage]) -> str:
    """The words a turn whose images are not sent gets after its text, naming them."""
    return UNSEEN.format(names=", ".join(image.name for image in images))


class ImagesUnreadable(Exception):
    """Images that could not be used; the message names each and says why, and what to do:
    attach another (the window, the CLI) or, `sent` by an API request, send another."""

    def __init__(self, refused: Sequence[ImageRefusal], words: str | None = None, *, sent: bool = False) -> None:
        self.refused = tuple(refused)
        if words is None:
            words = " ".join(f"{item.name} cannot be used: {item.reason}." for item in self.refused)
            words += " " + _advice(self.refused, sent)
        super().__init__(words)


def _advice(refused: Sequence[ImageRefusal], sent: bool) -> str:
    problems = {item.problem for item in refused}
    if problems == {ImageProblem.TOO_LARGE}:
        return "Send a smaller copy of the image." if sent else "Attach a smaller copy of the image."
    if sent:
        return f"Send a {READ_TYPES} image, or leave it out."
    if problems == {ImageProblem.NO_ACCESS}:
        return "Check the name and the path, and that you may read the file."
    return "Leave it out, or open it in an image viewer and save it again as PNG or JPEG, then attach that."


# One image check at a time in this process (the window's chips, the API's requests, an import):
# each is a child process that may take 2 GiB, so a second waits for the first to end.
_one_check = threading.Lock()


def checked_in_turn(items: Sequence[ImageInput], check: CheckImages) -> list[ImageResult]:
    """check(items), all of it, while no other image check runs in this process; RuntimeError
    when the check's child cannot start. Blocks: call off the loop."""
    with _one_check:
        return list(check(items))


def not_started(error: RuntimeError) -> str:
    """The words for an image check whose child process could not start."""
    return (f"Kestrel could not start its image check: {error}. Try again; if it goes on, close other "
            "programs to free memory.")


def check_images(items: Sequence[ImageInput], check: CheckImages) -> tuple[AttachedImage, ...]:
    """Check each image (`check`: in the image worker, check_in_worker) into the value a message
    keeps; ImagesUnreadable names every one refused, refuses more than MAX_IMAGES, and says so
    when the check could not start. One check at a time (checked_in_turn). Blocks: call off the loop."""
    if len(items) > MAX_IMAGES:
        raise ImagesUnreadable((), f"{len(items)} images were attached; a message takes at most {MAX_IMAGES}. "
                                   "Attach fewer, and ask about the rest in the next message.")
    images: list[AttachedImage] = []
    refused: list[ImageRefusal] = []
    try:
        results = checked_in_turn(items, check)
    except RuntimeError as error:
        raise ImagesUnreadable((), not_started(error)) from None
    for result in results:
        if isinstance(result, ImageRefusal):
            refused.append(result)
        else:
            images.append(result)
    if refused:
        raise ImagesUnreadable(refused)
    return tuple(images)


def in_worker(items: Sequence[ImageInput]) -> Iterator[ImageResult]:
    from app.documents.image_worker import check_in_worker

    return check_in_worker(items)


async def read_images(paths: Sequence[Path], check: CheckImages = in_worker) -> tuple[AttachedImage, ...]:
    """Image files checked in the image worker's child process (one that crashes or hangs a
    decoder is refused, never Kestrel), waited for on a thread so the event loop goes on."""
    return await asyncio.to_thread(check_images, [Path(path) for path in paths], check)


async def read_image_data(data: bytes, name: str = PASTED, check: CheckImages = in_worker) -> AttachedImage:
    """Pasted image bytes (a PNG from the clipboard) checked the same way; ImagesUnreadable if refused."""
    images = await asyncio.to_thread(check_images, [PastedImage(bytes(data), name)], check)
    return images[0]
