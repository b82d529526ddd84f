"""Images in API requests, read by the HTTP layer: inline base64 reaches the service with the turn and
the part it came in; addresses, bad base64, too many, too big and images outside user turns get a 400
naming the part, before the service sees the request. Real sockets on 127.0.0.1 and the official
clients over FakeAnswers; tests/server/test_api_images_live.py runs the real service and engine."""

from __future__ import annotations

import base64
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import httpx2 as httpx
import openai
import pytest

from app.engine.backends.llama import image_prompt
from app.server.images import MAX_BASE64_CHARS, MAX_IMAGE_BYTES, MAX_IMAGES
from app.service.api.api_types import ApiImage
from tests.helpers.vision_gguf import png_bytes
from tests.server.helpers import KEY, FakeAnswers, anthropic_client, loop_thread, openai_client, serving, words

AUTH = {"Authorization": f"Bearer {KEY}"}
PNG = png_bytes()
DATA_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()


def picture(url: str = DATA_URL, **extra: Any) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url, **extra}}


def anthropic_picture(data: str = base64.b64encode(PNG).decode()) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


def test_the_limits_are_the_engines() -> None:
    assert (MAX_IMAGES, MAX_IMAGE_BYTES) == (image_prompt.MAX_IMAGES, image_prompt.MAX_IMAGE_BYTES)
    assert len(base64.b64encode(b"x" * MAX_IMAGE_BYTES)) == MAX_BASE64_CHARS


def test_inline_images_reach_the_service_with_their_turn_and_part() -> None:
    fake = FakeAnswers()
    other = png_bytes(8, 8, seed=3)
    with loop_thread() as thread, serving(thread, fake) as server:
        client = openai_client(server.address)
        client.chat.completions.create(model="tiny", messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "What is this?"}, picture(detail="high")]},
            {"role": "assistant", "content": "A square."},
            {"role": "user", "content": [picture("data:image/png;base64," + base64.b64encode(other).decode()),
                                         {"type": "text", "text": "And this?"}]}])
        client.responses.create(model="tiny", instructions="Be brief.", input=[
            {"role": "user", "content": [{"type": "input_text", "text": "Look"},
                                         {"type": "input_image", "image_url": DATA_URL, "detail": "auto"}]}])
        anthropic_client(server.address).messages.create(model="tiny", max_tokens=8, messages=[
            {"role": "user", "content": "Call it."},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "look", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "done"},
                                         anthropic_picture(), {"type": "text", "text": "This one?"}]}])
    chat, responses, messages = fake.asks
    assert [(m.role.value, m.content, m.images) for m in chat.messages] == [
        ("system", "Be brief.", ()), ("user", "What is this?", ()), ("assistant", "A square.", ()),
        ("user", "And this?", ())]  # the images wait for the check: the service puts them in
    assert chat.images == (ApiImage(1, "messages[1].content[1].image_url.url", PNG),
                           ApiImage(3, "messages[3].content[0].image_url.url", other))
    assert responses.images == (ApiImage(1, "input[0].content[1].image_url", PNG),)
    assert [(m.role.value, m.content) for m in messages.messages] == [
        ("user", "Call it."), ("assistant", ""), ("tool", "done"), ("user", "This one?")]
    assert messages.images == (ApiImage(3, "messages[2].content[1].source.data", PNG),)


@contextmanager
def listener() -> Iterator[socket.socket]:
    """A port on 127.0.0.1 that records whether anything connected to it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        sock.setblocking(False)
        yield sock


def connected(sock: socket.socket) -> bool:
    try:
        sock.accept()[0].close()
    except BlockingIOError:
        return False
    return True


def test_an_address_is_refused_and_never_opened() -> None:
    fake = FakeAnswers()
    with listener() as sock, loop_thread() as thread, serving(thread, fake) as server:
        address = f"http://127.0.0.1:{sock.getsockname()[1]}/cat.png"
        user = [{"role": "user", "content": [{"type": "text", "text": "Hi"}, picture(address)]}]
        with pytest.raises(openai.BadRequestError) as chat:
            openai_client(server.address).chat.completions.create(model="tiny", messages=user)  # type: ignore[arg-type]
        with pytest.raises(openai.BadRequestError) as responses:
            openai_client(server.address).responses.create(model="tiny", input=[
                {"role": "user", "content": [{"type": "input_image", "image_url": address.replace("http", "https"),
                                              "detail": "auto"}]}])
        with pytest.raises(anthropic.BadRequestError) as messages:
            anthropic_client(server.address).messages.create(model="tiny", max_tokens=8, messages=[
                {"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": address}}]}])
        assert not connected(sock)
    assert fake.asks == []
    said = "Kestrel does not fetch addresses for a request: send the image inline as"
    assert chat.value.param == "messages[0].content[1].image_url.url"
    assert words(chat.value).startswith(f"messages[0].content[1].image_url.url is an address ('{address}'). {said} "
                                         "a data: URL (base64).")
    assert responses.value.param == "input[0].content[0].image_url" and said in words(responses.value)
    assert messages.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert words(messages.value).startswith(f"messages[0].content[0].source.type is 'url'. {said} a base64 source")


def post_chat(server_address: str, content: list[dict[str, Any]], role: str = "user") -> httpx.Response:
    return httpx.post(f"{server_address}/v1/chat/completions", headers=AUTH, timeout=60,
                      json={"model": "tiny", "messages": [{"role": role, "content": content}]})


@pytest.mark.parametrize(("content", "param", "words"), [
    ([picture("data:image/png;base64,iVBORw0KGgo*")], "messages[0].content[0].image_url.url", "is not valid base64"),
    ([picture("data:image/png;base64,iVBO Rw0K")], "messages[0].content[0].image_url.url", "is not valid base64"),
    ([picture("data:image/png;base64,")], "messages[0].content[0].image_url.url", "holds no image"),
    ([picture("data:image/png," + "x" * 10)], "messages[0].content[0].image_url.url", "must hold its image as base64"),
    ([picture("data:text/plain;base64,aGVsbG8=")], "messages[0].content[0].image_url.url", "not of an image"),
    ([picture("file:///etc/passwd")], "messages[0].content[0].image_url.url", "is an address"),
    ([picture("cat.png")], "messages[0].content[0].image_url.url", "must be a data: URL"),
    ([{"type": "image_url"}], "messages[0].content[0].image_url", "is required"),
    ([{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}], "messages[0].content[0].type",
     "takes text and image parts only"),
    ([picture()] * (MAX_IMAGES + 1), f"messages[0].content[{MAX_IMAGES}].image_url.url",
     f"is image {MAX_IMAGES + 1} of this request; a request takes at most {MAX_IMAGES} images"),
])
def test_a_bad_image_part_gets_400_naming_it(content: list[dict[str, Any]], param: str, words: str) -> None:
    fake = FakeAnswers()
    with loop_thread() as thread, serving(thread, fake) as server:
        reply = post_chat(server.address, content)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == param and error["message"].startswith(param) and words in error["message"], error
    assert fake.asks == []


def test_images_outside_user_turns_and_uploaded_files_are_refused() -> None:
    fake = FakeAnswers()
    with loop_thread() as thread, serving(thread, fake) as server:
        for role in ("system", "assistant", "tool"):
            reply = post_chat(server.address, [picture()], role)
            assert reply.status_code == 400
            assert reply.json()["error"]["message"] == (
                f"messages[0].content[0].type is 'image_url' in a message whose role is '{role}': Kestrel takes "
                "images in user messages only.")
        with pytest.raises(openai.BadRequestError, match="Kestrel keeps no uploaded files") as uploaded:
            openai_client(server.address).responses.create(model="tiny", input=[
                {"role": "user", "content": [{"type": "input_image", "file_id": "file-1", "detail": "auto"}]}])
        assert uploaded.value.param == "input[0].content[0].file_id"
        client = anthropic_client(server.address)
        for messages in ([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": [anthropic_picture()]}],
                         [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                                        "content": [anthropic_picture()]}]}]):
            with pytest.raises(anthropic.BadRequestError, match="Kestrel takes images in"):
                client.messages.create(model="tiny", max_tokens=8, messages=messages)  # type: ignore[arg-type]
        with pytest.raises(anthropic.BadRequestError, match=r"messages\[0\].content\[0\].source.data is not valid base64"):
            client.messages.create(model="tiny", max_tokens=8, messages=[
                {"role": "user", "content": [anthropic_picture("not base64!")]}])
    assert fake.asks == []


def test_an_image_past_20_mb_is_refused_before_it_is_decoded() -> None:
    fake = FakeAnswers()
    # One character past the longest base64 of 20 MB; and 20 MB and one byte, encoded, which is not longer.
    too_long = "A" * (MAX_BASE64_CHARS + 4)
    just_over = base64.b64encode(b"\0" * (MAX_IMAGE_BYTES + 1)).decode()
    assert len(just_over) == MAX_BASE64_CHARS
    with loop_thread() as thread, serving(thread, fake) as server:
        long_reply = post_chat(server.address, [picture("data:image/png;base64," + too_long)])
        with pytest.raises(anthropic.BadRequestError) as over:
            anthropic_client(server.address).messages.create(model="tiny", max_tokens=8, messages=[
                {"role": "user", "content": [anthropic_picture(just_over)]}])
    assert long_reply.status_code == 400
    assert "holds an image of about 20.0 MB; each image may be at most 20 MB" in long_reply.json()["error"]["message"]
    assert "messages[0].content[0].source.data holds an image of 20.0 MB" in words(over.value)
    assert fake.asks == []


def test_models_say_which_take_images() -> None:
    with loop_thread() as thread, serving(thread, FakeAnswers()) as server:
        listed = openai_client(server.address).models.list().data
        anthropic_listed = anthropic_client(server.address).models.list().data
    assert listed[0].model_extra is not None and listed[0].model_extra["vision"] is False
    assert anthropic_listed[0].model_extra is not None and anthropic_listed[0].model_extra["vision"] is False


def test_a_body_past_32_mb_gets_413_saying_what_to_send_less_of() -> None:
    fake = FakeAnswers()
    with loop_thread() as thread, serving(thread, fake) as server:
        with pytest.raises(anthropic.APIStatusError) as large:
            anthropic_client(server.address).messages.create(model="tiny", max_tokens=8, messages=[
                {"role": "user", "content": [anthropic_picture("A" * (MAX_BASE64_CHARS - 4))] * 2}])
    assert large.value.status_code == 413
    assert large.value.body["error"]["type"] == "request_too_large"  # type: ignore[index]
    assert words(large.value).endswith("are accepted. Send less: fewer or smaller images (base64 makes each a third "
                                       "larger), or shorter messages.")
    assert fake.asks == []
