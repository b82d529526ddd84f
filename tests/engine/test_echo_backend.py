"""A backend added with one subpackage and one registration (tests/engine/echo_backend/), driven through the
real engine process and through the service's model session, on an address and on a file Kestrel knows nothing of."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.core.generation import GenerationSettings
from app.core.paths import data_paths
from app.engine.backends import registry
from app.engine.backends.backend import Backend
from app.engine.backends.spec import ModelLocation
from app.engine.capabilities import Capability
from app.engine.failures import NoBackend, Unsupported
from app.engine.protocol import AnswerShape, ChatMessage, Delta, Done, Load
from app.library.installed import InstalledModel
from app.library.models import ModelLibrary
from app.service.event_bus import EventBus, TaskGroup
from app.service.events import ModelState
from app.service.models.client import EngineClient
from app.service.models.engine_errors import EngineError
from app.service.models.model_session import ModelSession
from app.service.models.model_setup import ModelSetup
from app.service.settings_keeper import SettingsKeeper
from app.service.storage import IN_MEMORY, Storage
from tests.engine.echo_backend import BACKEND as ECHO
from tests.engine.echo_backend.backend import DEVICE, EchoBackend

HELLO = [ChatMessage("user", "hello there")]


@pytest.fixture
def echo_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one registration: this process and every engine it starts see the echo backend."""
    monkeypatch.setenv(registry.EXTRA_BACKENDS, "tests.engine.echo_backend")


async def _answer(client: EngineClient, shape: AnswerShape | None = None) -> tuple[str, Done]:
    parts: list[str] = []
    async for event in client.generate(HELLO, GenerationSettings(max_tokens=50), shape=shape):
        if isinstance(event, Delta):
            parts.append(event.text)
        else:
            return "".join(parts), event
    raise AssertionError("no Done")


def test_registered_it_takes_its_addresses_and_files_after_the_built_in_backends(echo_registered: None) -> None:
    assert registry.registered()[-1] is ECHO
    assert isinstance(EchoBackend.open(Load(1, "echo://Polly")), Backend)  # the one contract the loop drives
    assert registry.backend_for(ModelLocation("echo://Polly")) is ECHO
    assert registry.backend_for(ModelLocation("/models/polly.echo")) is ECHO
    assert registry.backend_for(ModelLocation("/models/polly.gguf", "gguf")).name == "llama.cpp"


def test_unregistered_the_engine_takes_no_echo_address() -> None:
    async def scenario() -> EngineError:
        client = EngineClient()
        try:
            with pytest.raises(EngineError) as refused:
                await client.load("echo://Polly")
            return refused.value
        finally:
            await client.shutdown()

    assert asyncio.run(asyncio.wait_for(scenario(), 120)).failure == NoBackend("echo://Polly")


def test_the_real_engine_process_loads_an_address_streams_and_refuses_what_it_does_not_declare(
        echo_registered: None) -> None:
    async def scenario() -> None:
        client = EngineClient()
        try:
            loaded = await client.load("echo://Polly", context_length=512)
            assert (loaded.device, loaded.model_path, loaded.architecture) == (DEVICE, "echo://Polly", "echo")
            text, done = await _answer(client)
            assert text == "Polly heard: hello there"
            assert done.finish_reason == "stop" and done.stats.tokens == 4 and done.stats.device == DEVICE
            assert await client.count_tokens("one two three") == 3
            for shape, capability in ((AnswerShape(tools='[{"type": "function", "function": {"name": "f"}}]'),
                                       Capability.TOOLS),
                                      (AnswerShape(json_object=True), Capability.JSON_SCHEMAS),
                                      (AnswerShape(grammar='root ::= "x"'), Capability.GRAMMARS)):
                with pytest.raises(EngineError) as refused:
                    await _answer(client, shape)
                assert refused.value.failure == Unsupported(
                    "echo://Polly", "Echo", capability,
                    ("llama.cpp", "ONNX Runtime GenAI", "a server you added") if capability != Capability.GRAMMARS
                    else ("llama.cpp",))
            text, _ = await _answer(client)  # the same engine goes on answering
            assert text == "Polly heard: hello there"
        finally:
            await client.shutdown()

    asyncio.run(asyncio.wait_for(scenario(), 120))


def test_the_model_session_loads_an_echo_file_and_its_engine_answers(echo_registered: None, tmp_path: Path) -> None:
    speaker = tmp_path / "parrot.echo"
    speaker.write_text("Parrot\n", encoding="utf-8")
    # The library records formats it knows ("gguf", "onnx"); this model is none of them.
    model = InstalledModel(id="parrot", title="Parrot", path=speaker, size=7, sha256=None, source="test",
                           added=0.0, format="echo")  # type: ignore[arg-type]

    async def scenario() -> None:
        bus, tasks = EventBus(), TaskGroup(asyncio.get_running_loop())
        storage = await Storage.open(IN_MEMORY, None)
        keeper = SettingsKeeper(lambda: storage, bus.emit)
        client = EngineClient()
        session = ModelSession(client, ModelSetup(ModelLibrary(data_paths().models), bus.emit), bus, tasks, keeper,
                               context_length=lambda: 1024, answers_busy=lambda: False,
                               answer_writing=lambda: False, threads_file=None)
        try:
            assert await session.load_model(model), session.detail
            assert session.state == ModelState.READY and session.loaded is not None
            assert session.loaded.device == DEVICE and session.loaded.model_path == str(speaker)
            text, done = await _answer(client)
            assert text == "Parrot heard: hello there" and done.finish_reason == "stop"
        finally:
            await client.shutdown()
            await storage.close()

    asyncio.run(asyncio.wait_for(scenario(), 120))
