"""Images to an OpenAI-compatible server: a second `kestrel serve` on 127.0.0.1 serving the tiny vision pair (and a
text-only model), spoken to as OpenAI-compatible through a recording forwarder, through the real engine process.

The tiny vision model's weights are random (tests/helpers/vision_gguf.py): what it says is not tested, only that
the image reached its prompt (the peer counts its positions in the prompt's tokens) and that the request carried
it as OpenAI's image_url part."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from openai.types.chat import (ChatCompletionContentPartImageParam, ChatCompletionContentPartTextParam,
                               ChatCompletionUserMessageParam)
from openai.types.chat.chat_completion_content_part_image_param import ImageURL
from pydantic import TypeAdapter

from app.core.answer_stats import FinishReason
from app.core.attachments import AttachedImage
from app.core.conversation import Role
from app.core.generation import GenerationSettings
from app.core.paths import DataPaths
from app.engine.failure_words import WINDOW, describe
from app.engine.failures import ErrorKind, NoVision
from app.engine.protocol import ChatMessage
from app.library.models import ModelLibrary
from app.library.servers.book import as_chat_model
from app.library.servers.listing import list_models
from app.library.servers.records import AddedServer, ModelAbility, ModelOverride, RemoteModel, ServerKind
from app.service import events as ev
from app.service.api.api_images import refuse_unseeing
from app.service.api.api_types import ApiRefused
from app.service.chats.vision import not_said_to_see
from app.service.doors.servers import ServersDoor
from app.service.models.client import EngineClient
from tests.cli.test_chat_cli import kestrel
from tests.helpers.http_servers import Served, running_server
from tests.helpers.recording_forwarder import Forwarder, forwarding
from tests.helpers.remote_answers import add_server, load, stream, with_engine
from tests.helpers.remote_peers import KestrelPeer, kestrel_peer
from tests.helpers.tiny_gguf import build_tiny_gguf
from tests.helpers.vision_gguf import IMAGE_TOKENS, build_vision_pair, png_bytes
from tests.service.conftest import StartService

pytestmark = pytest.mark.slow

PNG = png_bytes(48, 32)
PICTURE = AttachedImage("picture.png", "image/png", 48, 32, PNG, "")
IMAGE_POSITIONS = IMAGE_TOKENS + 2  # the image's embeddings and the two marker tokens around them
LIMIT_S = 240


@dataclass
class VisionPeer:
    """The second Kestrel, its models' ids, and the forwarder in front of it."""

    peer: KestrelPeer
    forwarder: Forwarder
    sees: str  # the tiny vision model, its projector paired
    text_only: str  # a tiny model with no projector
    titles: dict[str, str] = field(default_factory=dict)


@pytest.fixture(scope="module")
def vision_peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VisionPeer]:
    folder = tmp_path_factory.mktemp("vision-peer")
    (folder / "vision").mkdir()
    model_file, projector = build_vision_pair(folder / "vision")
    text_file = build_tiny_gguf(folder / "plain.gguf", name="kestrel-plain")
    home = folder / "home"
    library = ModelLibrary(DataPaths(home / "data", home / "config", home / "cache", home / "logs").ensure().models)
    sees = library.set_projector(library.add_reference(model_file).id, projector)
    text_only = library.add_reference(text_file)
    with kestrel_peer(home, model_file) as peer, forwarding(peer.url) as forwarder:
        yield VisionPeer(peer, forwarder, sees.id, text_only.id)


def conforms(value: Any, typed: Any) -> None:
    """value has the keys the openai client's TypedDict requires, no key it does not name, and its "type" literal."""
    hints = typing.get_type_hints(typed)
    assert typed.__required_keys__ <= value.keys() <= hints.keys(), (value.keys(), typed.__name__)
    if "type" in hints:
        assert value["type"] in typing.get_args(hints["type"]), (value["type"], typed.__name__)


def test_a_chat_with_an_image_reaches_the_peer_as_an_openai_image_part_and_is_answered(
        started_service: StartService, vision_peer: VisionPeer) -> None:
    peer, forwarder = vision_peer.peer, vision_peer.forwarder

    async def scenario() -> None:
        async with started_service(engine=EngineClient(), start="open") as started:
            servers = ServersDoor(started.service)
            await servers.add("peer", forwarder.url, ServerKind.OPENAI, peer.key)
            models = {m.name: m for m in await servers.models("peer")}
            assert models[vision_peer.sees].abilities == {ModelAbility.VISION}  # its /v1/models says "vision": true
            assert models[vision_peer.text_only].abilities == frozenset()
            # A chat's own remote model, as the window knows it from memory: what its server last said.
            known = started.service.servers.known
            assert known(f"peer/{vision_peer.sees}").vision  # type: ignore[union-attr]
            assert not known(f"peer/{vision_peer.text_only}").vision  # type: ignore[union-attr]
            assert await servers.load(models[vision_peer.sees]), started.doors.model.model_detail
            loaded = started.doors.model.loaded
            # Said to see, and nothing said of tools: they are still offered (the server says if it cannot).
            assert loaded is not None and loaded.vision and loaded.vision_problem == "" and loaded.calls_tools
            assert started.doors.attach.vision().available
            forwarder.seen.clear()
            assert started.doors.chat.send("What is this?", images=[PICTURE])
            await started.doors.chat.wait_idle()
            [_, seen] = started.doors.chat.messages
            started.doors.chat.new_conversation()
            assert started.doors.chat.send("What is this?")  # the same question in a chat of its own, no image
            await started.doors.chat.wait_idle()
            [_, plain] = started.doors.chat.messages
            assert plain.stats is not None and seen.stats is not None
            assert seen.stats.error == "" and seen.stats.finish_reason is FinishReason.LENGTH and seen.text
            assert seen.stats.server == "peer" and seen.stats.device == plain.stats.device
            # The peer's own count of the prompt holds the image's positions.
            assert seen.stats.prompt_tokens >= plain.stats.prompt_tokens + IMAGE_POSITIONS

    asyncio.run(asyncio.wait_for(scenario(), LIMIT_S))
    [asked, alone] = forwarder.chat_bodies()
    turn = asked["messages"][-1]
    assert turn == {"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()}}]}
    assert alone["messages"][-1] == {"role": "user", "content": "What is this?"}
    # As the official openai client types them: the message, its text part, its image part and the image's URL.
    conforms(turn, ChatCompletionUserMessageParam)
    list(TypeAdapter(ChatCompletionUserMessageParam).validate_python(turn)["content"])
    text, image = turn["content"]
    conforms(text, ChatCompletionContentPartTextParam)
    conforms(image, ChatCompletionContentPartImageParam)
    conforms(image["image_url"], ImageURL)


def test_images_for_a_model_its_server_does_not_say_sees_are_refused_in_words_unless_set_by_hand(
        started_service: StartService, vision_peer: VisionPeer) -> None:
    peer, forwarder = vision_peer.peer, vision_peer.forwarder

    async def scenario() -> None:
        async with started_service(engine=EngineClient(), start="open") as started:
            servers = ServersDoor(started.service)
            await servers.add("peer", forwarder.url, ServerKind.OPENAI, peer.key)
            models = {m.name: m for m in await servers.models("peer")}
            assert await servers.load(models[vision_peer.text_only]), started.doors.model.model_detail
            title = f"{vision_peer.text_only} on peer"
            state = started.doors.attach.vision()
            assert not state.available and state.reason == not_said_to_see(title)
            assert state.reason == (f"{title} cannot see images: its server does not say that it takes them. Choose "
                                    "a model tagged Vision, such as Gemma 3 4B (Get a model).")
            forwarder.seen.clear()
            assert not started.doors.chat.send("What is this?", images=[PICTURE])
            [problem] = started.events.of(ev.Problem)
            assert problem.kind == "model" and problem.text.startswith(state.reason) and "not sent" in problem.text
            assert started.doors.chat.conversation is None and forwarder.chat_bodies() == []

            # Set by hand: the image goes, and this peer's model (no projector) refuses it in the peer's words.
            await servers.set_override("peer", vision_peer.text_only,
                                       ModelOverride(abilities=frozenset({ModelAbility.VISION})))
            models = {m.name: m for m in await servers.models("peer")}
            assert models[vision_peer.text_only].abilities == {ModelAbility.VISION}
            for name in (vision_peer.sees, vision_peer.text_only):  # loaded again, as the person set it now
                assert await servers.load(models[name]), started.doors.model.model_detail
            assert started.doors.attach.vision().available
            assert started.doors.chat.send("What is this?", images=[PICTURE])
            await started.doors.chat.wait_idle()
            answer = started.doors.chat.messages[-1]
            assert answer.stats is not None and "cannot see images" in answer.stats.error
            [asked] = forwarder.chat_bodies()
            assert asked["messages"][-1]["content"][1]["type"] == "image_url"

    asyncio.run(asyncio.wait_for(scenario(), LIMIT_S))


def test_the_backend_itself_refuses_images_for_a_model_not_said_to_see(vision_peer: VisionPeer) -> None:
    """Whatever front end asks (the API server's, a script's): the engine does not send them."""
    add_server("peer", vision_peer.forwarder.url, ServerKind.OPENAI, key=vision_peer.peer.key)
    asked = (ChatMessage(Role.USER, "What is this?", images=(PNG,)),)

    async def work(client: EngineClient) -> object:
        refused = await load(client, "peer", vision_peer.text_only)
        assert refused is None, refused
        vision_peer.forwarder.seen.clear()
        return await stream(client, asked, GenerationSettings(max_tokens=2))

    streamed = with_engine(work)
    error = streamed.error  # type: ignore[attr-defined]
    assert error is not None and error.kind == ErrorKind.NO_VISION
    name = f"{vision_peer.text_only} on peer"
    assert error.failure == NoVision(name, f"peer does not say that {vision_peer.text_only} takes images.")
    assert describe(error.failure, WINDOW) == (
        f"{name} cannot read images. peer does not say that {vision_peer.text_only} takes images. Send the message "
        "without the images, or choose a model that reads images.")
    assert vision_peer.forwarder.chat_bodies() == []


def test_a_model_marked_vision_by_hand_with_the_cli_gets_the_image_sent(vision_peer: VisionPeer) -> None:
    """`kestrel servers set peer MODEL --vision` on a model its server does not say sees: the engine sends the image
    as OpenAI's image_url part (this peer's model has no projector, so the peer itself refuses it, in its words)."""
    add_server("peer", vision_peer.forwarder.url, ServerKind.OPENAI, key=vision_peer.peer.key)
    marked = kestrel("servers", "set", "peer", vision_peer.text_only, "--vision")
    assert marked.returncode == 0, marked.stderr
    asked = (ChatMessage(Role.USER, "What is this?", images=(PNG,)),)

    async def work(client: EngineClient) -> object:
        refused = await load(client, "peer", vision_peer.text_only)
        assert refused is None, refused
        vision_peer.forwarder.seen.clear()
        return await stream(client, asked, GenerationSettings(max_tokens=2))

    streamed = with_engine(work)
    [body] = vision_peer.forwarder.chat_bodies()
    assert body["messages"][-1]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()}}]
    error = streamed.error  # type: ignore[attr-defined]
    assert error is not None and error.kind != ErrorKind.NO_VISION  # not refused here: the peer's own refusal


def test_openrouters_input_modalities_say_which_models_see() -> None:
    """OpenRouter's /v1/models says a model's inputs in architecture.input_modalities; the abilities stay not known
    (nothing is said of tools), and what the person set by hand wins."""
    listed = {"data": [
        {"id": "google/gemma-3-4b-it", "context_length": 131072,
         "architecture": {"input_modalities": ["text", "image"], "output_modalities": ["text"]}},
        {"id": "meta-llama/llama-3.1-8b-instruct", "architecture": {"input_modalities": ["text"]}},
        {"id": "bare"}]}
    with running_server() as server:
        server.files["/v1/models"] = Served(json.dumps(listed).encode())
        added = AddedServer("router", ServerKind.OPENAI, server.base)
        gemma, llama, bare = list_models(added, None)
        by_hand = AddedServer("router", ServerKind.OPENAI, server.base,
                              overrides={"bare": ModelOverride(abilities=frozenset({ModelAbility.VISION})),
                                         "google/gemma-3-4b-it": ModelOverride(abilities=frozenset())})
        by_hand_models = {m.name: m for m in list_models(by_hand, None)}
    assert (gemma.abilities, gemma.abilities_known, gemma.context_length) == (frozenset({ModelAbility.VISION}), False, 131072)
    assert (llama.abilities, bare.abilities) == (frozenset(), frozenset())
    assert by_hand_models["bare"].abilities == {ModelAbility.VISION} and by_hand_models["bare"].abilities_known
    assert by_hand_models["google/gemma-3-4b-it"].abilities == frozenset()
    assert as_chat_model(gemma, added).vision and not as_chat_model(llama, added).vision


def test_the_api_server_refuses_images_for_a_remote_model_not_said_to_see_in_its_words() -> None:
    added = AddedServer("peer", ServerKind.OPENAI, "http://127.0.0.1:8080")
    with pytest.raises(ApiRefused) as refused:
        refuse_unseeing(as_chat_model(RemoteModel("peer", "m"), added), None)
    assert (refused.value.status, refused.value.code) == (400, "model_not_vision")
    assert refused.value.message == ("The model m on peer cannot see images: its server does not say that it takes "
                                     "them. Name a model that does (GET /v1/models marks them \"vision\": true), or "
                                     "send the request without images.")
    refuse_unseeing(as_chat_model(RemoteModel("peer", "m", abilities=frozenset({ModelAbility.VISION})), added), None)


def test_the_same_peer_spoken_to_as_ollama_gets_the_image_in_ollamas_shape(vision_peer: VisionPeer) -> None:
    """/api/show's capabilities say "vision"; the image goes in the turn's images list and reaches the prompt."""
    add_server("peer", vision_peer.forwarder.url, ServerKind.OLLAMA, key=vision_peer.peer.key)
    question = ChatMessage(Role.USER, "What is this?")
    settings = GenerationSettings(temperature=0.0, max_tokens=2)

    async def work(client: EngineClient) -> object:
        refused = await load(client, "peer", vision_peer.sees)
        assert refused is None, refused
        vision_peer.forwarder.seen.clear()
        return [await stream(client, (question,), settings),
                await stream(client, (dataclasses.replace(question, images=(PNG,)),), settings)]

    answers = with_engine(work)
    assert isinstance(answers, list)
    plain, seen = answers
    assert plain.error is None and seen.error is None and plain.done is not None and seen.done is not None
    assert seen.done.stats.prompt_tokens >= plain.done.stats.prompt_tokens + IMAGE_POSITIONS
    [_, asked] = [json.loads(body) for _, path, body in vision_peer.forwarder.seen if path == "/api/chat"]
    assert asked["messages"][-1]["images"] == [base64.b64encode(PNG).decode()]
