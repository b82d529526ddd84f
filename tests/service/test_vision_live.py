"""Images end to end on the real engine: a model added with its projector beside it is paired by
the library, loaded with it by the session (Loaded.vision), and a checked image reaches llama.cpp's
multimodal path through the chat door, is answered, kept in the history, and counted again on the
next question. The model and projector are tests/helpers/vision_gguf.py's tiny random-weight pair:
what a real vision model says about a picture is not tested here (none can be had offline)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from app.core.conversation import MessageState
from app.service import events as ev
from app.service.models.client import EngineClient
from tests.helpers.vision_gguf import IMAGE_TOKENS, build_vision_pair, png_bytes
from tests.service.conftest import SMALL, library_of, run, stored

# The tiny projector's image: its tokens, the two wrapper tokens and a newline (the engine's tests).
IMAGE_POSITIONS = IMAGE_TOKENS + 3


def test_a_model_added_with_its_projector_sees_an_image_through_the_chat_door(
        started_service, tmp_path: Path) -> None:
    (tmp_path / "vision").mkdir()
    model_file, projector_file = build_vision_pair(tmp_path / "vision")
    picture = tmp_path / "holiday photo.png"
    picture.write_bytes(png_bytes(48, 32))

    async def scenario():
        short = dataclasses.replace(SMALL, max_tokens=4)
        async with started_service(short, model=model_file, engine=EngineClient()) as started:
            service, doors, recorder = started.service, started.doors, started.events
            installed = service.session.model
            assert installed is not None and installed.projector is not None
            assert installed.projector.name == projector_file.name  # copied in beside the model
            assert [m.id for m in library_of(service).list() if m.vision] == [installed.id]
            assert service.session.client.loaded.vision, service.session.client.loaded.vision_problem
            assert doors.attach.vision().available and doors.attach.vision().reason == ""

            images = await doors.attach.read_images([picture])
            assert [(i.name, i.width, i.height) for i in images] == [("holiday photo.png", 48, 32)]
            assert doors.chat.send("What is in this picture?", images=images)
            await doors.chat.wait_idle()
            first = doors.chat.messages[-1]
            assert first.state == MessageState.COMPLETE, recorder.of(ev.Problem)
            user, saved = await stored(service, first.conversation_id)
            assert [i.data for i in user.images] == [images[0].data] and saved == first

            assert doors.chat.send("And the colours?")
            await doors.chat.wait_idle()
            second = doors.chat.messages[-1]
            assert second.state == MessageState.COMPLETE
            # The picture is still in the chat's prompt: the second prompt holds the first one,
            # its answer and the new question, and the image's positions were not encoded again.
            assert second.stats.prompt_tokens > first.stats.prompt_tokens >= IMAGE_POSITIONS
            assert second.stats.prompt_tokens_evaluated < second.stats.prompt_tokens - IMAGE_POSITIONS

    run(scenario)


def test_images_for_a_model_without_a_projector_are_not_sent_and_say_why(started_service, tmp_path: Path) -> None:
    (tmp_path / "vision").mkdir()
    model_file, _ = build_vision_pair(tmp_path / "vision")
    alone = tmp_path / "alone" / "tiny-vision.gguf"
    alone.parent.mkdir()
    alone.write_bytes(model_file.read_bytes())
    picture = tmp_path / "cat.png"
    picture.write_bytes(png_bytes())

    async def scenario():
        async with started_service(model=alone, engine=EngineClient()) as started:
            service, doors, recorder = started.service, started.doors, started.events
            assert service.session.model is not None and service.session.model.projector is None
            state = doors.attach.vision()
            assert not state.available and "no vision projector" in state.reason
            images = await doors.attach.read_images([picture])
            before = len(doors.chat.messages)
            assert not doors.chat.send("What is this?", images=images)
            await doors.chat.wait_idle()
            assert len(doors.chat.messages) == before
            assert state.reason in recorder.of(ev.Problem)[-1].text

    run(scenario)
