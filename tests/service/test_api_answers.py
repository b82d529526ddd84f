"""The API server's answers in the service: model choice, context, the engine's line, refusals, the log."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime
from pathlib import Path

import pytest

from app.core.server_settings import ServerSettings
from app.engine.failures import BadModelFile
from app.engine import protocol as p
from app.engine.protocol import ChatMessage, Delta, Done, Load
from app.library.importer import import_model_file
from app.service import events as ev
from app.service.api.api_answers import SERVING, ApiAsk, ApiRefused, Started
from app.service.events import Pace
from app.service.models.background import WindowState
from tests.helpers.scripted_answers import Script
from tests.service.conftest import SMALL, Started as StartedService, engine_line, run, session_of


def _ask(text: str = "Hello", **fields: object) -> ApiAsk:
    return ApiAsk(endpoint="/v1/chat/completions", client="127.0.0.1:5000", model=fields.pop("model", None),  # type: ignore[arg-type]
                  messages=(ChatMessage("user", text),), **fields)  # type: ignore[arg-type]


async def _collect(started: StartedService, ask: ApiAsk) -> list[Started | Delta | Done]:
    return [event async for event in started.service.api.answer(ask)]


async def _refusal(started: StartedService, ask: ApiAsk) -> ApiRefused:
    with pytest.raises(ApiRefused) as caught:
        await _collect(started, ask)
    return caught.value


async def _server(started: StartedService, **changes: object) -> None:
    settings = started.doors.settings.settings
    await started.doors.settings.update_settings(dataclasses.replace(settings, server=dataclasses.replace(
        ServerSettings(), **changes)))


def test_an_answer_names_its_model_streams_and_keeps_no_chat(started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            service, doors = started.service, started.doors
            started.engine.scripts.append(Script(text=("Hi", " there"), endless=False))
            events = await _collect(started, _ask(settings={"temperature": 0.2, "max_tokens": 10}))
            first, *rest = events
            assert isinstance(first, Started) and first.model == doors.model.model.id and first.context_length == 1024
            assert "".join(e.text for e in rest if isinstance(e, Delta)) == "Hi there"
            done = rest[-1]
            assert isinstance(done, Done) and done.stats.tokens == 2 and done.stats.prompt_tokens > 0
            generate = started.engine.requests[-1]
            assert generate.settings.temperature == 0.2 and generate.settings.max_tokens == 10
            assert any(isinstance(e, ev.ActivityChanged) and e.text == SERVING for e in started.events.events)
            assert await service.conversations.listing() == [], "API answers are not kept as chats"
            service.api.log(ev.RequestRecord(datetime.now(), "127.0.0.1:5000", "/v1/chat/completions", first.model,
                                       done.stats.prompt_tokens, done.stats.tokens, 0.0, 200))
            assert [r.status for r in service.api.recent_requests] == [200]
            assert started.events.of(ev.ApiRequestLogged)[-1].record.endpoint == "/v1/chat/completions"

    run(scenario)


def test_bad_requests_are_refused_naming_the_field_or_model(started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            unknown = await _refusal(started, _ask(model="no-such-model"))
            assert unknown.status == 404 and "no-such-model" in unknown.message and unknown.param == "model"
            hot = await _refusal(started, _ask(settings={"temperature": "hot"}))
            assert hot.status == 400 and hot.param == "temperature" and "'hot'" in hot.message
            tiny = await _refusal(started, _ask(context_length=100))
            assert tiny.status == 400 and tiny.param == "context_length" and "100" in tiny.message

    run(scenario)


def test_another_model_loads_just_in_time_unless_only_the_loaded_one_may_answer(started_service,
                                                                                thinking_model: Path) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            service, doors = started.service, started.doors
            other = await asyncio.to_thread(import_model_file, service.session.setup.library, thinking_model)
            first = doors.model.model.id
            await _server(started, only_loaded_model=True)
            refused = await _refusal(started, _ask(model=other.id))
            assert refused.status == 400 and refused.code == "model_not_loaded" and other.title in refused.message
            await _server(started, only_loaded_model=False)
            started.engine.scripts.append(Script(text=("ok",), endless=False))
            events = await _collect(started, _ask(model=other.title.upper()))  # a title names it too
            assert isinstance(events[0], Started) and events[0].model == other.id
            assert started.engine.loaded.model_path == str(other.path)
            assert session_of(service).app_model.id == first, "the app's own model stays the app's"
            listed = {m.id: m for m in await service.api.models()}
            assert listed[other.id].loaded and not listed[first].loaded
            assert listed[first].context_length == 2048  # the tiny model was made for 2048

    run(scenario)


def test_a_prompt_longer_than_the_context_reloads_when_it_fits_or_is_refused_with_both_numbers(
        started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            started.engine.scripts.append(Script(text=("fine",), endless=False))
            long = " ".join(f"w{i}" for i in range(1300))  # about 1300 tokens: more than 1024
            events = await _collect(started, _ask(long))
            assert isinstance(events[-1], Done) and events[-1].stats.prompt_tokens >= 1300
            assert started.engine.loaded.context_length >= 1300 + SMALL.max_tokens
            too_long = " ".join(f"w{i}" for i in range(2100))  # more than the 2048 it was made for
            refused = await _refusal(started, _ask(too_long))
            assert refused.status == 400 and "2048" in refused.message
            assert any(str(n) in refused.message for n in range(2100, 2200)), refused.message
            asked = await _collect(started, _ask("short", context_length=2048))
            assert isinstance(asked[0], Started) and asked[0].context_length == 2048

    run(scenario)


def test_beyond_the_waiting_limit_a_request_gets_503_and_a_closed_answer_frees_the_engine(
        started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            service = started.service
            await _server(started, max_waiting=1)
            started.engine.token_s = 0.02
            running = service.api.answer(_ask("long one", settings={"max_tokens": 100_000}))
            assert isinstance(await running.__anext__(), Started)
            await running.__anext__()
            waiting = asyncio.ensure_future(_collect(started, _ask("second")))
            await started.events.until(lambda: service.api.busy and engine_line(service).busy
                                       and service.api._waiting == 1)
            busy = await _refusal(started, _ask("third"))
            assert busy.status == 503 and busy.retry_after and "at most 1" in busy.message
            before = len([r for r in started.engine.requests])
            await running.aclose()  # the client went away: the engine stops, the next one runs
            second = await asyncio.wait_for(waiting, 10)
            assert isinstance(second[0], Started) and isinstance(second[-1], Done)
            assert len(started.engine.requests) == before + 1
            await started.events.until(lambda: not service.api.busy)

    run(scenario)


def test_api_conversations_become_chats_only_when_the_user_chose_so(started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            service = started.service
            started.engine.scripts.append(Script(text=("Not", " kept"), endless=False))
            await _collect(started, _ask("Unkept question"))
            await _server(started, keep_as_chats=True)
            started.engine.scripts.append(Script(text=("Kept", " answer"), endless=False))
            ask = dataclasses.replace(_ask("Kept question"), messages=(
                ChatMessage("system", "Be brief."), ChatMessage("user", "Kept question")))
            await _collect(started, ask)
            await started.events.until(lambda: started.events.of(ev.ConversationChanged), what="the kept chat")
            [chat] = await service.conversations.listing()
            assert chat.title == "API: Kept question" and chat.system_prompt == "Be brief."
            kept = await service.conversations.messages(chat.id)
            assert [(m.role.value, m.text) for m in kept] == [("user", "Kept question"),
                                                              ("assistant", "Kept answer")]
            assert kept[-1].stats.tokens == 2

    run(scenario)


def test_a_hidden_window_does_not_hold_an_api_answer(started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            service, doors = started.service, started.doors
            doors.set_window_state(WindowState.HIDDEN)  # "when hidden: pause", the default
            assert session_of(service).pace.pace == Pace.PAUSED
            started.engine.scripts.append(Script(text=("Still", " served"), endless=False))
            events = await asyncio.wait_for(_collect(started, _ask()), 10)
            assert "".join(e.text for e in events if isinstance(e, Delta)) == "Still served"
            paces = [e.pace for e in started.events.of(ev.PaceChanged)]
            assert paces[-2:] == [Pace.GENTLE, Pace.PAUSED], "gentle while serving, held again after"
            # Said once each way (the documents service's indexing waits for it meanwhile).
            assert [e.serving for e in started.events.of(ev.ServingChanged)] == [True, False]

    run(scenario)


def test_an_embedding_model_is_not_offered_to_clients_nor_answers(started_service, tmp_path: Path) -> None:
    from tests.helpers.embedding_gguf import build_embedding_gguf

    async def scenario() -> None:
        async with started_service() as started:
            service, doors = started.service, started.doors
            embedder = await asyncio.to_thread(import_model_file, service.session.setup.library,
                                               build_embedding_gguf(tmp_path / "embed.gguf"))
            listed = [m.id for m in await service.api.models()]
            assert doors.model.model.id in listed and embedder.id not in listed
            refused = await _refusal(started, _ask(model=embedder.id))
            assert refused.status == 400 and "embedding model" in refused.message and refused.param == "model"

    run(scenario)


# --- issue 35 item 2: a dead engine costs one answer, not every later one ------------------


def test_an_engine_that_dies_mid_answer_costs_that_answer_and_the_next_request_gets_a_new_engine(
        started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            service, doors, engine = started.service, started.doors, started.engine
            first_pid = engine.pid
            engine.scripts.append(Script(die_after=3))
            answer = service.api.answer(_ask("Keep talking", settings={"max_tokens": 100}))
            seen: list[Started | Delta | Done] = []
            with pytest.raises(ApiRefused) as caught:
                async for event in answer:
                    seen.append(event)
            assert isinstance(seen[0], Started) and sum(isinstance(e, Delta) for e in seen) == 3
            cut = caught.value
            assert cut.status == 503 and cut.code == "engine_error" and cut.retry_after
            assert "the next one starts a new engine" in cut.message
            await started.events.until(lambda: doors.model.model_state == ev.ModelState.FAILED, what="the death said")
            for _ in range(2):  # the next request, and the one after it
                engine.scripts.append(Script(text=("Back",), endless=False))
                events = await asyncio.wait_for(_collect(started, _ask("Are you back?")), 10)
                assert isinstance(events[0], Started) and isinstance(events[-1], Done)
                assert "".join(e.text for e in events if isinstance(e, Delta)) == "Back"
            assert engine.pid not in (None, first_pid) and engine.restarts == 1
            assert doors.model.model_state == ev.ModelState.READY

    run(scenario)


def test_an_engine_killed_between_requests_costs_no_answer_even_with_only_the_loaded_model(
        started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            service, doors, engine = started.service, started.doors, started.engine
            await _server(started, only_loaded_model=True)
            for death in range(1, 3):
                engine.die()
                await started.events.until(lambda: doors.model.model_state == ev.ModelState.FAILED,
                                           what="the death said")
                assert not any(m.loaded for m in await service.api.models())
                engine.scripts.append(Script(text=("Here",), endless=False))
                events = await asyncio.wait_for(_collect(started, _ask(model=doors.model.model.id)), 10)
                assert isinstance(events[-1], Done) and engine.restarts == death

    run(scenario)


def test_a_model_that_will_not_load_is_refused_with_its_reason_one_load_per_request(
        started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            doors, engine = started.doors, started.engine
            broken = BadModelFile("truncated", "The file ends before its tensors do: download it again.")

            def loads() -> int:
                return sum(isinstance(r, Load) for r in engine.requests)

            engine.die()
            await started.events.until(lambda: doors.model.model_state == ev.ModelState.FAILED, what="the death said")
            engine.load_refusals.extend([broken] * 2)
            for _ in range(2):
                before = loads()
                refused = await asyncio.wait_for(_refusal(started, _ask()), 10)
                assert refused.status == 500 and refused.code == "model_load_failed"
                assert "download it again" in refused.message and doors.model.model.title in refused.message
                assert loads() == before + 1, "one load per request, not none and not a loop"
            # Requests that wait on one failing load share its try: the file is not loaded once per waiter.
            engine.load_refusals.append(broken)
            engine.hold_loads()
            waiting = [asyncio.ensure_future(_refusal(started, _ask())) for _ in range(3)]
            await started.events.until(lambda: doors.model.model_state == ev.ModelState.LOADING and loads() == 4,
                                       what="the load")
            await asyncio.sleep(0.05)
            engine.release_loads()
            for refused in await asyncio.wait_for(asyncio.gather(*waiting), 10):
                assert refused.code == "model_load_failed" and "download it again" in refused.message
            assert loads() == 4
            # Once the file loads again (replaced, or memory freed), the next request is answered.
            engine.scripts.append(Script(text=("Loaded",), endless=False))
            events = await asyncio.wait_for(_collect(started, _ask()), 10)
            assert isinstance(events[-1], Done) and loads() == 5

    run(scenario)


def test_an_api_answer_decodes_with_the_threads_the_advisor_leaves_free_like_the_windows(started_service) -> None:
    # On a busy 2-core machine `kestrel chat` with 2 threads ran up to 25x slower than with 1; the API server
    # answered with the load's threads (all cores) whatever other programs did.
    from app.engine.backends.resources import default_threads
    from tests.service.conftest import set_busy_cores

    async def scenario() -> list[int | None]:
        async with started_service() as started:
            set_busy_cores(started.service, lambda: 1.0)  # one core taken by another program
            started.engine.scripts.append(Script(text=("Hi",), endless=False))
            events = await _collect(started, _ask())
            done = events[-1]
            assert isinstance(done, Done)
            return [request.threads for request in started.engine.requests if isinstance(request, p.Generate)]

    asked = run(scenario)
    cores = default_threads()
    assert asked == [max(1, cores - 1)], "the API's request asked the engine for the advisor's threads"
