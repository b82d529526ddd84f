"""ServersDoor, as the model manager will drive it: a server added and its models listed off the loop, one loaded
as the app's model through the real engine, a chat answered by it, and a dropped answer kept with the server's words."""

from __future__ import annotations

import asyncio
from pathlib import Path

from app.core.paths import data_paths
from app.library.servers.faults import ServerFault, ServerTrouble
from app.library.servers.records import ModelAbility, ModelOverride, RemoteModel, ServerKind
from app.service import events as ev
from app.service.doors.servers import ServersDoor
from app.service.models.calibration import SETTLE_S
from app.service.models.client import EngineClient
from tests.helpers.hostile_server import Script, hostile_server
from tests.helpers.remote_peers import closed_port
from tests.service.conftest import StartService


def test_a_remote_model_is_added_listed_loaded_and_answers_a_chat(started_service: StartService) -> None:
    script = Script(models=["m"], ollama=True, words=["Hello", " from", " afar"])

    async def scenario() -> None:
        with hostile_server(script) as url:
            async with started_service(engine=EngineClient(), start="open") as started:
                servers = ServersDoor(started.service)
                added = await servers.add("studio-pc", url, ServerKind.OLLAMA, "sk-secret")
                assert added.key is not None and [s.name for s in await servers.servers()] == ["studio-pc"]
                [model] = await servers.models("studio-pc")
                assert model.id == "studio-pc/m" and model.context_length == 8192
                await servers.set_override("studio-pc", "m", ModelOverride(abilities=frozenset({ModelAbility.VISION})))
                [model] = await servers.models("studio-pc")
                assert model.abilities == {ModelAbility.VISION}
                assert await servers.load(model), started.doors.model.model_detail
                loaded = started.doors.model.loaded
                assert loaded is not None and loaded.device == f"studio-pc ({url.removeprefix('http://')})"
                assert started.doors.model.model.title == "m on studio-pc"  # type: ignore[union-attr]
                assert started.doors.chat.send("Hi")
                await started.doors.chat.wait_idle()
                answer = started.doors.chat.messages[-1]
                assert answer.text == "Hello from afar" and answer.stats is not None
                assert answer.stats.device == loaded.device and answer.stats.tokens == 3

                script.drop_after = 1
                assert started.doors.chat.send("Again")
                await started.doors.chat.wait_idle()
                cut = started.doors.chat.messages[-1]
                assert cut.text == "Hello" and cut.stats is not None
                assert cut.stats.error.startswith(f"studio-pc ({url}) stopped answering partway through")
                problems = started.events.of(ev.Problem)
                assert problems and problems[-1].text == cut.stats.error
        assert script.keys[-1] == "Bearer sk-secret"

    asyncio.run(asyncio.wait_for(scenario(), 180))


def test_a_server_that_is_off_fails_the_load_with_its_words_and_a_removed_one_is_not_added(
        started_service: StartService, tiny_model: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"

    async def scenario() -> None:
        async with started_service(engine=EngineClient(), start="open") as started:
            servers = ServersDoor(started.service)
            await servers.add("off-box", url, ServerKind.OPENAI)
            try:
                await servers.models("off-box")
            except ServerFault as fault:
                assert fault.facts.trouble is ServerTrouble.DOWN
            else:
                raise AssertionError("a server that is off listed models")
            model = RemoteModel("off-box", "m")
            assert not await servers.load(model)
            assert started.doors.model.model_state == ev.ModelState.FAILED
            assert started.doors.model.model_detail.startswith(f"off-box ({url}) did not answer")
            assert (await servers.remove("off-box")) is not None and await servers.servers() == ()
            try:
                await servers.chat_model(model)
            except ServerFault as fault:
                assert fault.facts.trouble is ServerTrouble.NOT_ADDED
            else:
                raise AssertionError("a removed server's model was made a chat model")
        assert not (data_paths().config / "server-keys.json").exists()

    asyncio.run(asyncio.wait_for(scenario(), 180))


def test_no_speed_calibration_is_sent_to_a_remote_model(started_service: StartService) -> None:
    """The window measures this CPU with a short background answer; a server's model is not this CPU, and the
    person asked it nothing."""
    script = Script()

    async def scenario() -> None:
        with hostile_server(script) as url:
            async with started_service(engine=EngineClient(), start="open", calibrate=True) as started:
                servers = ServersDoor(started.service)
                await servers.add("far", url, ServerKind.OPENAI)
                assert await servers.load(RemoteModel("far", "m")), started.doors.model.model_detail
                await asyncio.sleep(SETTLE_S * 1.5)

    asyncio.run(asyncio.wait_for(scenario(), 180))
    assert script.requests == ["GET /v1/models"]
