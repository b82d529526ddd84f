"""A request's images for the API server: refused unless the model sees, then each checked in the image check's child process."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from app.core.attachments import AttachedImage
from app.documents.image_check import ImageRefusal, ImageResult, PastedImage
from app.engine.protocol import ChatMessage, Loaded
from app.library.installed import InstalledModel
from app.service.api.api_types import ApiAsk, ApiImage, ApiRefused
from app.service.documents.attached_images import CheckImages, ImagesUnreadable, checked_in_turn, in_worker, not_started
from app.service.chats.vision import vision_state


def refuse_unseeing(model: InstalledModel, loaded: Loaded | None) -> None:
    """ApiRefused (400) unless the model takes images: a vision projector paired with it, and
    loaded with it where the model is loaded (loaded: the engine's facts then, else None)."""
    if vision_state(model, loaded).available:
        return
    if not model.vision:
        why = ("its server does not say that it takes them." if model.remote
               else "it has no vision projector (an mmproj file) paired with it.")
    else:
        why = (loaded.vision_problem if loaded is not None and loaded.vision_problem
               else "its vision projector did not load.")
    raise ApiRefused(400, f"The model {model.title} cannot see images: {why} Name a model that does (GET "
                          f"/v1/models marks them \"vision\": true), or send the request without images.",
                     param="model", code="model_not_vision")


def _checked(images: Sequence[ApiImage], check: CheckImages) -> list[ImageResult]:
    # Each image is named by its part, so the check's refusal names it as the request does; one
    # check at a time, shared with the window's (checked_in_turn).
    return checked_in_turn([PastedImage(image.data, image.part) for image in images], check)


@dataclass(frozen=True)
class SeenImages:
    """A request's images once checked: its messages with each turn's image bytes in (as the
    engine is given them), and each turn's images as a kept chat keeps them (`kept`, by the turn's
    index in the messages), named "API image 1", "API image 2"… in the request's order."""

    messages: tuple[ChatMessage, ...]
    kept: Mapping[int, tuple[AttachedImage, ...]] = field(default_factory=dict)


# What an image sent through the API is called in a kept chat (the window's pasted one is "Pasted image").
KEPT_NAME = "API image {number}"


async def seen_images(ask: ApiAsk, check: CheckImages = in_worker) -> SeenImages:
    """ask.messages with each of ask.images, checked (decoded in the image check's child, scaled
    down, written again as PNG or JPEG), in its turn's images; ApiRefused (400) naming every
    part refused and why. The check runs in one child process for the request, waited for on a
    thread so the event loop goes on."""
    if not ask.images:
        return SeenImages(ask.messages)
    try:
        results = await asyncio.to_thread(_checked, ask.images, check)
    except RuntimeError as error:
        raise ApiRefused(503, not_started(error), code="image_check_failed") from None
    refused = [result for result in results if isinstance(result, ImageRefusal)]
    if refused:
        raise ApiRefused(400, str(ImagesUnreadable(refused, sent=True)), param=refused[0].name, code="invalid_image")
    turns: dict[int, list[AttachedImage]] = {}
    for number, (image, result) in enumerate(zip(ask.images, results, strict=True), start=1):
        assert isinstance(result, AttachedImage)
        # Checked under its part's name, so a refusal names the part; kept under a name for the user.
        turns.setdefault(image.turn, []).append(dataclasses.replace(result, name=KEPT_NAME.format(number=number)))
    messages = tuple(dataclasses.replace(message, images=(*message.images, *(i.data for i in turns[index])))
                     if index in turns else message for index, message in enumerate(ask.messages))
    return SeenImages(messages, {turn: tuple(images) for turn, images in turns.items()})
