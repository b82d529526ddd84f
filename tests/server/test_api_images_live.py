"""Images through the API server end to end: the official openai and anthropic clients over real sockets
on 127.0.0.1, the real service core, the image check's child process and real llama.cpp on the tiny
vision pair (tests/helpers/vision_gguf.py: random weights, so what the model says is not tested, only
that the image reached its prompt), and a model with no projector refused before any image is checked."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from app.core.attachments import AttachedImage
from app.core.server_settings import ServerSettings
from app.documents.image_check import check_image_data
from app.engine import protocol as p
from app.service.models.client import EngineClient
from tests.helpers.scripted_answers import Script
from tests.helpers.scripted_engine import ScriptedEngine
from tests.helpers.vision_gguf import IMAGE_TOKENS, build_vision_pair, png_bytes
from tests.server.helpers import KEY, anthropic_client, api_over, chat_entries, loop_thread, openai_client, real_service, words

# The tiny projector's image in the prompt: its tokens and the two wrapper tokens around them.
IMAGE_POSITIONS = IMAGE_TOKENS + 2
PNG = base64.b64encode(png_bytes(48, 32)).decode()
NOT_AN_IMAGE = base64.b64encode(b"Dear diary, today I saw a kestrel.").decode()


def asking(text: str, *images: str) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    parts += [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}} for data in images]
    return [{"role": "user", "content": parts}]


def text_only_of(client: openai.OpenAI, asked: dict[str, Any], words_long: int) -> int:
    """The prompt tokens of a text-only question of so many words."""
    answer = client.chat.completions.create(messages=asking("word " * words_long), **asked)
    assert answer.usage is not None
    return answer.usage.prompt_tokens


def test_an_image_reaches_the_model_through_both_clients_and_a_bad_one_is_named(tmp_path: Path) -> None:
    (tmp_path / "vision").mkdir()
    model_file, _ = build_vision_pair(tmp_path / "vision")
    with loop_thread() as thread, real_service(thread, model_file, EngineClient()) as service, \
            api_over(thread, service) as server:
        assert service.session.loaded is not None and service.session.loaded.vision
        client = openai_client(server.address)
        [listed] = chat_entries(client.models.list().data)
        assert listed.model_extra is not None and listed.model_extra["vision"] is True
        asked: dict[str, Any] = {"model": service.session.model.id, "max_tokens": 2, "temperature": 0.0}
        text_only = client.chat.completions.create(messages=asking("What is this?"), **asked)
        seen = client.chat.completions.create(messages=asking("What is this?", PNG), **asked)
        two = client.chat.completions.create(messages=asking("What is this?", PNG, PNG), **asked)
        assert text_only.usage is not None and seen.usage is not None and two.usage is not None
        # Each image costs its positions (the newline after the images' markers costs one more).
        assert seen.usage.prompt_tokens >= text_only.usage.prompt_tokens + IMAGE_POSITIONS
        assert two.usage.prompt_tokens == seen.usage.prompt_tokens + IMAGE_POSITIONS
        assert seen.choices[0].finish_reason == "length"

        response = client.responses.create(model=service.session.model.id, max_output_tokens=2, input=[
            {"role": "user", "content": [{"type": "input_text", "text": "What is this?"},
                                         {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}",
                                          "detail": "auto"}]}])
        assert response.usage is not None and response.usage.input_tokens == seen.usage.prompt_tokens

        with anthropic_client(server.address).messages.stream(model=service.session.model.id, max_tokens=2, messages=[
                {"role": "user", "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                    {"type": "text", "text": "What is this?"}]}]) as stream:
            streamed = "".join(stream.text_stream)
            final = stream.get_final_message()
        assert final.usage.input_tokens >= text_only.usage.prompt_tokens + IMAGE_POSITIONS
        assert final.stop_reason == "max_tokens" and streamed == "".join(
            block.text for block in final.content if block.type == "text")

        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(messages=asking("What is this?", PNG, NOT_AN_IMAGE), **asked)
        assert refused.value.param == "messages[0].content[2].image_url.url"
        assert words(refused.value) == ("messages[0].content[2].image_url.url cannot be used: it is not an image: it "
                                        "holds text. Send a PNG, JPEG, WebP, GIF or BMP image, or leave it out.")
        damaged = base64.b64encode(base64.b64decode(PNG)[:60]).decode()  # a PNG cut short
        with pytest.raises(anthropic.BadRequestError) as cut:
            anthropic_client(server.address).messages.create(model=service.session.model.id, max_tokens=2, messages=[
                {"role": "user", "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": damaged}}]}])
        assert words(cut.value).startswith("messages[0].content[0].source.data cannot be used: it could not be read")

        # The images count in the prompt's length as the engine counts them: a prompt that fits the
        # loaded context as text, and not with 16 images, is answered after a reload with a larger one.
        loaded = service.session.loaded
        assert loaded is not None and loaded.context_length == 1024
        per_word = (text_only_of(client, asked, 110) - text_only_of(client, asked, 10)) / 100
        fill = 10 + int((900 - text_only_of(client, asked, 10)) / per_word)
        assert 1024 - 16 * IMAGE_POSITIONS < text_only_of(client, asked, fill) < 1024
        many = client.chat.completions.create(messages=asking("word " * fill, *[PNG] * 16), **asked)
        assert many.usage is not None and many.usage.prompt_tokens > 1024
        loaded = service.session.loaded
        assert loaded is not None and loaded.context_length > many.usage.prompt_tokens


def test_the_engine_gets_the_checked_image_in_its_turn_and_a_projector_that_did_not_load_is_named(
        tmp_path: Path) -> None:
    """On the scripted engine (whose projector always loads, until the test says it did not)."""
    (tmp_path / "vision").mkdir()
    model_file, _ = build_vision_pair(tmp_path / "vision")
    engine = ScriptedEngine()
    engine.default_script = Script(text=("A", " square"), endless=False)
    wide = png_bytes(2000, 20)
    with loop_thread() as thread, real_service(thread, model_file, engine) as service, \
            api_over(thread, service) as server:
        client = openai_client(server.address)
        answer = client.chat.completions.create(model=service.session.model.id, messages=[
            *asking("What is this?", base64.b64encode(wide).decode()),
            {"role": "assistant", "content": "A square."}, {"role": "user", "content": "And its colour?"}])
        assert answer.choices[0].message.content == "A square"
        generate = engine.requests[-1]
        assert isinstance(generate, p.Generate)
        assert [(m.role.value, len(m.images)) for m in generate.messages] == [("user", 1), ("assistant", 0),
                                                                              ("user", 0)]
        checked = check_image_data(wide, "wide")  # what the check's child made of it: scaled down
        assert isinstance(checked, AttachedImage) and checked.width == 1536
        assert generate.messages[0].images == (checked.data,)

        assert engine.loaded is not None
        problem = "The vision projector mmproj-tiny-vision.gguf could not be loaded: it is damaged."
        engine.loaded = dataclasses.replace(engine.loaded, vision=False, vision_problem=problem)
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(model=service.session.model.id, messages=asking("Hi", PNG))
        assert words(refused.value) == (
            f"The model {service.session.model.title} cannot see images: {problem} Name a model that does (GET /v1/models "
            "marks them \"vision\": true), or send the request without images.")
        assert engine.requests[-1] is generate  # nothing more reached the engine


def test_a_model_without_a_projector_is_refused_before_any_image_is_checked(tmp_path: Path) -> None:
    (tmp_path / "vision").mkdir()
    model_file, _ = build_vision_pair(tmp_path / "vision")
    alone = tmp_path / "alone" / model_file.name
    alone.parent.mkdir()
    alone.write_bytes(model_file.read_bytes())
    with loop_thread() as thread, real_service(thread, alone, EngineClient()) as service, \
            api_over(thread, service) as server:
        assert service.session.model.projector is None
        client = openai_client(server.address)
        said = (f"The model {service.session.model.title} cannot see images: it has no vision projector (an mmproj file) "
                "paired with it. Name a model that does (GET /v1/models marks them \"vision\": true), or send the "
                "request without images.")
        # Not an image either: the check would say so, but the model is refused first.
        for stream in (False, True):
            with pytest.raises(openai.BadRequestError) as refused:
                client.chat.completions.create(model=service.session.model.id, messages=asking("Hi", NOT_AN_IMAGE),
                                               stream=stream)  # type: ignore[call-overload]
            assert words(refused.value) == said and refused.value.param == "model"
        with pytest.raises(anthropic.BadRequestError) as anthropic_refused:
            anthropic_client(server.address).messages.create(model=service.session.model.id, max_tokens=2, messages=[
                {"role": "user", "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]}])
        assert words(anthropic_refused.value) == said
        text = client.chat.completions.create(model=service.session.model.id, messages=asking("Hi"), max_tokens=2)
        assert text.choices[0].finish_reason == "length"  # text alone is answered as before


def test_a_kept_api_conversation_keeps_each_turns_checked_images(tmp_path: Path) -> None:
    """With "keep API conversations as chats" on, the chat it leaves has each user turn's images as
    the check made them (and as the model was given them), in their own turn; a turn of more than
    a message keeps has its first eight, and its text says how many more there were."""
    (tmp_path / "vision").mkdir()
    model_file, _ = build_vision_pair(tmp_path / "vision")
    engine = ScriptedEngine()
    engine.default_script = Script(text=("Two", " pictures"), endless=False)
    wide = png_bytes(2000, 20)
    small = [png_bytes(10 + n, 12) for n in range(10)]
    with loop_thread() as thread, real_service(thread, model_file, engine,
                                               ServerSettings(key=KEY, keep_as_chats=True)) as service, \
            api_over(thread, service) as server:
        client = openai_client(server.address)
        answer = client.chat.completions.create(model=service.session.model.id, messages=[
            {"role": "system", "content": "Be brief."},
            *asking("What is this?", base64.b64encode(wide).decode()),
            {"role": "assistant", "content": "A line."},
            *asking("And these?", *(base64.b64encode(data).decode() for data in small))])
        assert answer.choices[0].message.content == "Two pictures"
        given = engine.requests[-1]
        assert isinstance(given, p.Generate)

        chats = thread.call(_kept_chats(service))
        [chat] = chats
        assert chat.title == "API: And these?" and chat.system_prompt == "Be brief."
        first, reply, second, kept_answer = thread.call(service.conversations.messages(chat.id))
        assert [(m.role.value, m.text) for m in (first, reply, kept_answer)] == [
            ("user", "What is this?"), ("assistant", "A line."), ("assistant", "Two pictures")]
        checked = check_image_data(wide, "wide")
        assert isinstance(checked, AttachedImage)
        [image] = first.images
        assert (image.name, image.mime, image.width, image.height) == ("API image 1", checked.mime, 1536, checked.height)
        assert image.data == checked.data == given.messages[1].images[0]
        assert image.note == checked.note and image.note.startswith("Scaled down")
        assert second.text == ("And these?\n\n(2 more images were sent with this message and not kept: a chat "
                               "keeps at most 8 images a message.)")
        assert [(i.name, i.width, i.height) for i in second.images] == [
            (f"API image {n + 2}", 10 + n, 12) for n in range(8)]
        assert [i.data for i in second.images] == list(given.messages[3].images[:8])
        assert reply.images == () and kept_answer.images == ()


async def _kept_chats(service: Any) -> list[Any]:
    """The chats once the kept one is written (it is saved after the answer, in a task of its own)."""
    async with asyncio.timeout(20):
        while not (chats := await service.conversations.listing()):
            await asyncio.sleep(0.02)
    return chats
