"""The speed calibration: one short background answer when this CPU measured nothing, never in a person's way."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from app.core.answer_stats import FinishReason
from app.core.conversation import Role
from app.core.generation import GenerationSettings
from app.engine import protocol as p
from app.hardware.power import power_from_status
from app.library.importer import import_model_file
from app.library.models import ModelLibrary
from app.core.paths import data_paths
from app.service import events as ev
from app.service.models import calibration
from app.service.models.background import WindowState
from app.service.models.calibration import CALIBRATION_PROMPT, CALIBRATION_TOKENS, SETTLE_S
from app.service.models.client import EngineClient
from app.service.models.engine_queue import EngineQueue, Withdrawn
from app.service.models.threads import MIN_TOKENS
from app.service.root import Service
from tests.helpers.embedding_gguf import build_embedding_gguf
from tests.helpers.scripted_answers import Script
from tests.helpers.scripted_engine import ScriptedEngine
from tests.service.conftest import StartService, install, run, session_of, set_busy_cores, settings_file

# A chat whose answer is too short to measure a speed (under MIN_TOKENS): what measures is the calibration.
SHORT = GenerationSettings(max_tokens=4, temperature=0.0, context_length=1024)


class _TimedRequests(list[Any]):
    """The scripted engine's requests, with when each was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def append(self, item: Any) -> None:
        self.times.append(time.monotonic())
        super().append(item)


class TimedEngine(ScriptedEngine):
    """The scripted engine, with the time of each request and of each cancel (and how many requests came before it)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.requests = _TimedRequests()
        self.cancels: list[tuple[float, int]] = []

    def cancel(self) -> None:
        if self._current is not None:
            self.cancels.append((time.monotonic(), len(self.requests)))
        super().cancel()


def calibrations(engine: ScriptedEngine) -> list[int]:
    """Where the calibration's Generate requests stand among the engine's requests."""
    return [i for i, r in enumerate(engine.requests)
            if isinstance(r, p.Generate) and r.messages and r.messages[0].content == CALIBRATION_PROMPT]


def test_a_ready_model_is_calibrated_once_greedy_with_an_answers_threads_and_the_verdicts_say_measured(
        started_service: StartService) -> None:
    async def scenario() -> tuple[Any, ...]:
        engine = ScriptedEngine(token_s=0.02)  # 50 tokens/s: a speed the verdicts calibrate on
        async with started_service(engine=engine, calibrate=True) as started:
            service, events = started.service, started.events
            session = session_of(service)
            set_busy_cores(service, lambda: 0.0)  # the advisor's choice stays the same whatever else runs
            assert not session.threads.measured_here()
            # Hidden with the default "pause": nothing runs, and the lists are made meanwhile.
            started.doors.set_window_state(WindowState.HIDDEN)
            await service.library.refresh()
            await asyncio.sleep(SETTLE_S * 1.5)
            assert not calibrations(engine), "a calibration ran while the window was hidden and the engine paused"
            listed = len(events.of(ev.LibraryListed))
            started.doors.set_window_state(WindowState.FOREGROUND)
            await events.until(lambda: len(events.of(ev.LibraryListed)) > listed, what="the lists judged again")
            threads_file = settings_file(service).with_name("threads.json")
            await events.until(lambda: threads_file.exists(), what="threads.json written")
            await session.reload()  # loaded again: measured now, so never again
            await asyncio.sleep(SETTLE_S * 1.5)
            conversations = await service.conversations.listing()
            return (engine, events, session.threads.measured(), json.loads(threads_file.read_text()),
                    conversations, session.answer_threads(service.keeper.settings))

    engine, events, measured, kept, conversations, threads = run(scenario)
    [at] = calibrations(engine)
    asked = engine.requests[at]
    assert [m.content for m in asked.messages] == [CALIBRATION_PROMPT]
    assert asked.settings.temperature == 0.0 and asked.settings.max_tokens == CALIBRATION_TOKENS >= MIN_TOKENS
    assert asked.threads == threads, "it decodes with the threads an answer gets"
    [key] = measured
    assert key.startswith("tiny model.gguf|") and measured[key]["best"][str(threads)] > 0
    assert kept[key]["best"] == measured[key]["best"], "kept in threads.json for the next runs"
    assert conversations == [], "the calibration is no chat"
    tiny = next(r for r in events.of(ev.LibraryListed)[-1].rows if r.model.id == "tiny-model").fit
    first = next(r for r in events.of(ev.LibraryListed)[0].rows if r.model.id == "tiny-model").fit
    assert first is not None and first.speed is not None and not first.speed.measured
    assert tiny is not None and tiny.speed is not None and tiny.speed.measured, tiny.speed
    assert not events.of(ev.MessageAdded) and not events.of(ev.Problem), "nothing is shown but the verdicts"


def test_a_chat_sent_during_the_calibration_cancels_it_and_goes_first(started_service: StartService) -> None:
    """The person's request cancels it between two tokens: the engine hears the cancel (mid-answer) before the
    chat's Generate, and no calibration comes after the chat."""
    token_s = 0.25

    async def scenario() -> TimedEngine:
        engine = TimedEngine(token_s=token_s)
        async with started_service(SHORT, engine=engine, calibrate=True) as started:
            events = started.events
            await events.until(lambda: calibrations(engine), what="the calibration's request")
            await asyncio.sleep(2.5 * token_s)  # a few tokens in, one half made
            started.doors.chat.send("Hello")
            await events.until(lambda: events.of(ev.AnswerFinished), what="the chat's answer")
            await asyncio.sleep(SETTLE_S * 1.5)  # not tried again: displaced by a person counts as its turn
            assert not session_of(started.service).threads.measured_here()
        return engine

    engine = run(scenario)
    [at] = calibrations(engine)
    generates = [i for i, r in enumerate(engine.requests) if isinstance(r, p.Generate)]
    assert generates == [at, at + 1], "the chat's answer came next, and no calibration after it"
    chat_at = engine.requests.times[at + 1]
    [(cancelled_at, requests_then)] = [c for c in engine.cancels if c[0] < chat_at]
    assert requests_then == at + 1, "the calibration was cancelled, mid-answer, before the chat's Generate was sent"
    # How long the chat waited is a timing, measured on a quiet machine, not asserted here: under a busy CI
    # machine's load the wall clock says little. The order above is what guards it.


async def _drain(events: Any) -> list[Any]:
    return [event async for event in events]


def test_the_line_cancels_a_request_that_gives_way_for_any_newcomer(started_service: StartService) -> None:
    """Every front end's request (a chat's, a quick ask's, an API request's) joins the same line, as
    a load's or an unload's hold does: each displaces a request that gives way, running or waiting."""
    async def scenario() -> tuple[list[Any], list[Any], list[Any], list[Any], bool]:
        engine = ScriptedEngine(token_s=0.05)
        async with started_service(engine=engine) as started:
            line: EngineQueue = session_of(started.service).engine
            endless = GenerationSettings(max_tokens=200, temperature=0.0)
            messages = (p.ChatMessage(Role.USER, "Hi"),)
            running = line.request(messages, endless, gives_way=True).events()
            first = await anext(running)
            busy_with_it = line.busy
            rest = asyncio.ensure_future(_drain(running))
            answer = await _drain(line.request(messages, GenerationSettings(max_tokens=2, temperature=0.0)).events())
            cancelled = [first, *await rest]
            # Running when a hold (a load) comes: cancelled too.
            running = line.request(messages, endless, gives_way=True).events()
            held = [await anext(running)]
            rest = asyncio.ensure_future(_drain(running))
            async with line.exclusive():
                held += await rest
            # Waiting behind a hold when a request comes: it leaves the line unstarted.
            release = asyncio.Event()

            async def hold() -> None:
                async with line.exclusive():
                    await release.wait()

            holding = asyncio.ensure_future(hold())
            await asyncio.sleep(0)
            waiting = line.request(messages, endless, gives_way=True).events()
            withdrawn = [await anext(waiting)]
            newcomer = asyncio.ensure_future(_drain(line.request(messages, GenerationSettings(max_tokens=2)).events()))
            withdrawn += await _drain(waiting)
            release.set()
            await holding
            await newcomer
            return cancelled, answer, held, withdrawn, busy_with_it

    cancelled, answer, held, withdrawn, busy_with_it = run(scenario)
    assert not busy_with_it, "a request that gives way keeps nobody waiting"
    for stream in (cancelled, held):
        assert isinstance(stream[-1], p.Done) and stream[-1].stats.finish_reason == FinishReason.CANCELLED
        assert len([e for e in stream if isinstance(e, p.Delta)]) < 10, "cancelled between two tokens, not run out"
    assert isinstance(answer[-1], p.Done) and answer[-1].stats.finish_reason == FinishReason.LENGTH
    assert isinstance(withdrawn[0], ev.Queued) and isinstance(withdrawn[-1], Withdrawn)


def test_it_waits_for_full_speed_and_stops_on_battery_saver_or_when_the_window_is_hidden(
        started_service: StartService, monkeypatch) -> None:
    saver = [True]
    # Windows' GetSystemPowerStatus with battery saver on, then on mains (winbase.h SYSTEM_POWER_STATUS:
    # ACLineStatus 0 battery / 1 mains, SystemStatusFlag 1 saver on), which this Linux machine cannot
    # report: the documented answers, not ones recorded from a machine.
    monkeypatch.setattr(calibration, "read_power", lambda: power_from_status(0, 1) if saver[0] else
                        power_from_status(1, 0))

    async def scenario() -> tuple[ScriptedEngine, bool, int]:
        engine = ScriptedEngine(token_s=0.1)
        async with started_service(engine=engine, calibrate=True) as started:
            doors, session = started.doors, session_of(started.service)
            await asyncio.sleep(SETTLE_S * 1.5)
            on_saver = len(calibrations(engine))
            saver[0] = False
            doors.set_window_state(WindowState.HIDDEN)  # back at full speed later: a new look
            doors.set_window_state(WindowState.FOREGROUND)
            await started.events.until(lambda: calibrations(engine), what="the calibration on mains power")
            await asyncio.sleep(0.3)
            doors.set_window_state(WindowState.HIDDEN)  # paused: it stops, and measures nothing
            await asyncio.sleep(0.3)
            stopped = not session.threads.measured_here()
            doors.set_window_state(WindowState.FOREGROUND)  # full speed again: it runs again
            await started.events.until(session.threads.measured_here, timeout=20,
                                        what="the calibration's measurement")
        return engine, stopped, on_saver

    engine, stopped, on_saver = run(scenario)
    assert on_saver == 0, "it ran on battery saver"
    assert stopped, "a paused calibration recorded a speed"
    first, second = calibrations(engine)
    assert engine.requests[first].settings == engine.requests[second].settings


def test_at_most_once_per_model_in_a_run_and_never_for_an_embedding_model(started_service: StartService,
                                                                          tmp_path: Path) -> None:
    async def scenario() -> tuple[ScriptedEngine, bool]:
        engine = ScriptedEngine()
        engine.scripts.append(Script(text=("Short.",), endless=False))  # ends before it measured anything
        async with started_service(engine=engine, calibrate=True) as started:
            session = session_of(started.service)
            await started.events.until(lambda: calibrations(engine), what="the calibration")
            await asyncio.sleep(SETTLE_S * 0.5)
            await session.reload()
            await asyncio.sleep(SETTLE_S * 1.5)
            embedder = import_model_file(ModelLibrary(data_paths().models),
                                         build_embedding_gguf(tmp_path / "embedder.gguf"))
            assert not embedder.chats
            assert await session.load_model(embedder)
            await asyncio.sleep(SETTLE_S * 1.5)
            return engine, session.threads.measured_here()

    engine, measured = run(scenario)
    assert len(calibrations(engine)) == 1 and not measured


def test_kestrel_chat_and_a_service_that_keeps_no_threads_file_never_calibrate(tiny_model: Path) -> None:
    """`kestrel chat` answers once (its Service has no settings file): a calibration would only delay its exit."""
    install(tiny_model)

    async def scenario() -> tuple[bool, bool]:
        paths = data_paths()
        chat = Service(history_path=paths.history_db, settings_path=None, library=ModelLibrary(paths.models),
                       client=ScriptedEngine(), calibrate=True)
        window = Service(history_path=paths.history_db, settings_path=paths.settings_file,
                         library=ModelLibrary(paths.models), client=ScriptedEngine(), calibrate=True)
        off = Service(history_path=paths.history_db, settings_path=paths.settings_file,
                      library=ModelLibrary(paths.models), client=ScriptedEngine())
        return chat.calibration is None and off.calibration is None, window.calibration is not None

    never, window = run(scenario)
    assert never and window


def test_the_real_engine_calibrates_the_tiny_model_and_keeps_its_speed(started_service: StartService) -> None:
    async def scenario() -> tuple[dict[str, Any], dict[str, Any], int]:
        async with started_service(engine=EngineClient(), calibrate=True) as started:
            session = session_of(started.service)
            await started.events.until(session.threads.measured_here, what="the calibration's measurement")
            threads_file = settings_file(started.service).with_name("threads.json")
            await started.events.until(lambda: threads_file.exists(), what="threads.json written")
            return (session.threads.measured(), json.loads(threads_file.read_text()),
                    len(await started.service.conversations.listing()))

    measured, kept, chats = run(scenario)
    [(key, entry)] = measured.items()
    assert key.startswith("tiny model.gguf|") and all(rate > 0 for rate in entry["best"].values())
    assert kept[key]["best"] == entry["best"] and chats == 0
