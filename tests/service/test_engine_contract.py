"""The same checks on the real EngineClient and on the ScriptedEngine, so the fake cannot drift.

Each check runs twice: on the real engine (llama.cpp on the tiny model, a recorded
machine) and on the scripted one. What the operating system does to the real engine (a
crash, a hang), a test asks of the scripted one by name. Loads and refusals are also
compared field by field, since both work them out from the same file and machine.

The hang checks are the real client's (SIGSTOP stands in for a driver that never
returns): before the heartbeat, Stop did nothing, the status stayed "Thinking…" for
ever, and quitting took 10 s. Their limits are short here (the app's are in
app/service/models/client.py), and shorter still for the scripted engine: every limit, wait
and bound of a check is scaled by its Kind's scale, so the check is the same.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from app.core.generation import GenerationSettings
from app.engine.failures import BadModelFile, BadShape, DeviceRefused, NoToolUse, PromptTooLong
from app.engine.protocol import AnswerShape, ChatMessage, Delta, Done
from app.service.models.client import EngineClient
from app.service.models.engine_errors import EngineCrashed, EngineDied, EngineError
from app.service.models.engine_handle import EngineHandle
from tests.hardware.machines import recorded_report
from tests.helpers.models import truncated_copy
from tests.helpers.scripted_answers import Script, written
from tests.helpers.scripted_engine import ScriptedEngine
from tests.helpers.stopped_engine import freeze

SHORT = GenerationSettings(max_tokens=12, temperature=0.0, seed=1)
LONG = GenerationSettings(max_tokens=100_000, temperature=0.0, seed=1)
HELLO = (ChatMessage("user", "Hello there"),)
TOOLS = '[{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]'
LIMITS = {"hang_after": 2.0, "hang_after_loading": 5.0, "stop_grace": 1.0}


@dataclass(frozen=True)
class Kind:
    """One of the two engines, and how a test crashes or freezes it."""

    name: str
    make: Callable[..., Any]  # (machine, **limits in the real engine's seconds)
    kill: Callable[[Any], None]
    freeze: Callable[[Any], None]
    scale: float  # its seconds per real engine second, for limits, waits and bounds


SCRIPTED_SCALE = 0.25


def _real(machine: str = "linux_vm", **limits: float) -> EngineClient:
    return EngineClient(hardware=functools.partial(recorded_report, machine), ping_every=0.2,
                        **{**LIMITS, **limits})


def _scripted(machine: str = "linux_vm", **limits: float) -> ScriptedEngine:
    scaled = {name: seconds * SCRIPTED_SCALE for name, seconds in {**LIMITS, **limits}.items()}
    return ScriptedEngine(machine=machine, **scaled)


def _freeze(client: EngineClient) -> None:
    assert client.pid is not None
    freeze(client.pid)


KINDS = {
    "real": Kind("real", _real, lambda client: os.kill(client.pid, signal.SIGKILL), _freeze, 1.0),
    "scripted": Kind("scripted", _scripted, lambda engine: engine.die(), lambda engine: engine.hang(),
                     SCRIPTED_SCALE),
}


@pytest.fixture(params=["real", "scripted"])
def kind(request: pytest.FixtureRequest) -> Kind:
    if request.param == "real" and os.name == "nt":
        pytest.skip("SIGSTOP and SIGKILL stand in for a hang and a crash")
    return KINDS[request.param]


def run(scenario: Callable[[], Any]) -> Any:
    return asyncio.run(asyncio.wait_for(scenario(), timeout=120))


async def _events(engine: Any, settings: GenerationSettings = SHORT, messages=HELLO, **options: Any) -> list:
    return [event async for event in engine.generate(messages, settings, **options)]


async def _deltas(stream: Any, count: int) -> None:
    for _ in range(count):
        assert isinstance(await stream.__anext__(), Delta)


async def _until(check: Callable[[], Any], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_both_have_every_member_of_engine_handle_with_its_parameters() -> None:
    methods = [name for name, value in vars(EngineHandle).items()
               if not name.startswith("_") and inspect.isfunction(value)]
    properties = [name for name, value in vars(EngineHandle).items() if isinstance(value, property)]
    assert {"load", "generate", "cancel", "shutdown"} <= set(methods) and "pid" in properties
    for engine in (EngineClient(), ScriptedEngine()):
        for name in methods:
            wanted, got = inspect.signature(getattr(EngineHandle, name)), inspect.signature(getattr(engine, name))
            assert [(p.name, p.kind, p.default) for p in list(wanted.parameters.values())[1:]] == \
                [(p.name, p.kind, p.default) for p in got.parameters.values()], (type(engine), name)
            assert inspect.iscoroutinefunction(getattr(EngineHandle, name)) == \
                inspect.iscoroutinefunction(getattr(engine, name)), (type(engine), name)
        for name in [*properties, *EngineHandle.__annotations__]:
            assert hasattr(engine, name), (type(engine), name)


def test_loads_and_refusals_are_the_real_engines_field_by_field(tiny_model: Path, thinking_model: Path,
                                                                 tmp_path: Path) -> None:
    truncated = truncated_copy(tiny_model, tmp_path / "cut short.gguf")
    asks: list[tuple[str, str, dict[str, Any]]] = [
        ("linux_vm", str(tiny_model), {"context_length": 512, "threads": 1}),
        ("linux_vm", str(tiny_model), {"context_length": 8192, "device": "cpu"}),
        ("linux_vm", str(thinking_model), {"context_length": 256}),
        ("linux_vm", str(tiny_model), {"device": "gpu"}),
        ("linux_vm", str(tiny_model), {"device": "npu"}),
        ("linux_vm", str(truncated), {}),
        ("linux_vm", str(tmp_path / "not there.gguf"), {}),
        ("windows_desktop_rtx4070", str(tiny_model), {"context_length": 512}),
        ("windows_desktop_rtx4070", str(tiny_model), {"context_length": 512, "gpu_layers": 0}),
    ]

    async def outcomes(make: Callable[..., Any]) -> list[Any]:
        found: list[Any] = []
        engines: dict[str, Any] = {}
        try:
            for machine, path, options in asks:
                engine = engines.setdefault(machine, make(machine))
                try:
                    loaded = await engine.load(path, **options)
                except EngineError as refused:
                    found.append((refused.failure, refused.message, engine.loaded))
                else:
                    found.append(dataclasses.replace(loaded, request_id=0, load_ms=0.0))
                    assert loaded.load_ms > 0 and engine.loaded is loaded
                    assert engine.load_request.model_path == path
        finally:
            for engine in engines.values():
                await engine.shutdown()
        return found

    real, scripted = run(lambda: outcomes(_real)), run(lambda: outcomes(_scripted))
    assert scripted == real
    assert [type(o).__name__ for o in real] == ["Loaded"] * 3 + ["tuple"] * 4 + ["Loaded"] * 2
    assert [type(o[0]) for o in real[3:7]] == [DeviceRefused, DeviceRefused, BadModelFile, BadModelFile]
    assert real[1].context_length == 2048 and real[2].thinks and real[2].thinking_switch
    assert real[7].fallback_reasons and "built without GPU support" in real[7].fallback_reasons[0]


def test_an_answer_streams_reuses_the_cache_and_the_engine_ends_cleanly(kind: Kind, tiny_model: Path) -> None:
    async def scenario():
        engine = kind.make()
        died: list[EngineDied] = []
        engine.on_died = died.append
        assert engine.pid is None and engine.loaded is None and engine.load_request is None
        loaded = await engine.load(str(tiny_model), context_length=512)
        pid = engine.pid
        first = await _events(engine)
        answer = "".join(e.text for e in first[:-1])
        follow_up = HELLO + (ChatMessage("assistant", answer), ChatMessage("user", "And then?"))
        second = await _events(engine, messages=follow_up, threads=1)
        report = await engine.hardware_report()
        await engine.unload()
        unloaded = engine.loaded
        third = await _events(engine, dataclasses.replace(SHORT, max_tokens=3))
        reloaded = (engine.loaded, engine.pid)
        await engine.shutdown()
        return loaded, pid, first, second, report, unloaded, third, reloaded, engine, died

    loaded, pid, first, second, report, unloaded, third, reloaded, engine, died = run(scenario)
    assert pid is not None and pid != os.getpid()
    deltas, done = first[:-1], first[-1]
    assert isinstance(done, Done) and len(deltas) >= 2 and all(isinstance(e, Delta) for e in deltas)
    assert done.finish_reason == "length" and done.stats.tokens == 12 and done.stats.device == "CPU"
    assert done.stats.prompt_tokens == done.stats.prompt_tokens_evaluated > 0
    assert done.stats.tokens_per_s > 0 and done.stats.ttft_ms > 0 and done.stats.threads == loaded.threads
    again = second[-1].stats
    assert again.prompt_tokens_evaluated < again.prompt_tokens, "the earlier turn came from the cache"
    assert again.threads == 1 and again.chat_format == loaded.chat_format
    assert report == recorded_report("linux_vm")
    assert unloaded is None and reloaded[0] is not None and reloaded[1] == pid, "reloaded in the same engine"
    assert third[-1].finish_reason == "length" and third[-1].stats.tokens == 3
    assert engine.pid is None and engine.loaded is None and not died, "shutdown is not a death"


def test_refusals_carry_their_kind_and_a_failed_load_keeps_the_last_model(kind: Kind, tiny_model: Path,
                                                                          tmp_path: Path) -> None:
    truncated = truncated_copy(tiny_model, tmp_path / "cut short.gguf")
    essay = (ChatMessage("user", "tell me about the falcon " * 200),)
    history = tuple(ChatMessage("user" if i % 2 == 0 else "assistant", f"turn {i} " + "the cat sat " * 40)
                    for i in range(12)) + (ChatMessage("user", "And now?"),)

    async def scenario():
        engine = kind.make()
        outcomes: list[Any] = []
        try:
            try:
                await _events(engine)
            except EngineError as exc:
                outcomes.append(exc.kind)
            await engine.load(str(tiny_model), context_length=256)
            try:
                await _events(engine, messages=essay)
            except EngineError as exc:
                failure = exc.failure
                assert isinstance(failure, PromptTooLong)
                outcomes.append((exc.kind, failure.context_length, failure.prompt_tokens > 256))
            trimmed = (await _events(engine, messages=history, trim_history=True))[-1]
            outcomes.append((trimmed.finish_reason, trimmed.stats.messages_left_out > 0))
            with pytest.raises(EngineError) as refused:
                await engine.load(str(truncated))
            failure = refused.value.failure
            assert isinstance(failure, BadModelFile) and failure.problem == "truncated"
            outcomes.append((refused.value.kind, engine.loaded))
            after = (await _events(engine))[-1]
            outcomes.append((after.finish_reason, engine.loaded.model_path, engine.load_request.model_path))
        finally:
            await engine.shutdown()
        return outcomes

    assert run(scenario) == ["no_model", ("context_overflow", 256, True), ("length", True), ("model_file", None),
                             ("length", str(tiny_model), str(tiny_model))]


def test_shapes_are_answered_and_refused_alike(kind: Kind, tiny_model: Path) -> None:
    async def scenario():
        engine = kind.make()
        refusals: list[Any] = []
        try:
            await engine.load(str(tiny_model), context_length=256)
            raw = (await _events(engine, messages=(), shape=AnswerShape(prompt="Once upon a time")))[-1]
            for shape in (AnswerShape(tools=TOOLS), AnswerShape(tools="[]"), AnswerShape(prompt="falcon " * 300)):
                try:
                    await _events(engine, shape=shape)
                except EngineError as exc:
                    refusals.append((exc.kind, type(exc.failure)))
            unused = (await _events(engine, shape=AnswerShape(tools=TOOLS, tool_choice="none")))[-1]
            plain = (await _events(engine))[-1]
            try:
                await _events(engine, shape=AnswerShape(tools=TOOLS))
            except EngineError as exc:
                refused = exc.failure
        finally:
            await engine.shutdown()
        return raw, refusals, unused, plain, refused

    raw, refusals, unused, plain, refused = run(scenario)
    assert (raw.stats.chat_format, raw.finish_reason, raw.stats.tokens) == ("raw", "length", 12)
    assert 0 < raw.stats.prompt_tokens < plain.stats.prompt_tokens
    assert refusals == [("unsupported", NoToolUse), ("unsupported", BadShape), ("context_overflow", PromptTooLong)]
    assert refused == NoToolUse(tiny_model.name)
    assert unused.stats.prompt_tokens == plain.stats.prompt_tokens and unused.finish_reason == "length"


def test_the_scripted_engine_makes_the_calls_its_script_says(tmp_path: Path) -> None:
    from tests.helpers.tiny_gguf import build_tiny_gguf

    template = (Path(__file__).resolve().parents[1] / "fixtures" / "chat_templates" / "Qwen-Qwen3-0.6B.jinja")
    model = build_tiny_gguf(tmp_path / "qwen.gguf", chat_template=template.read_text(encoding="utf-8"))
    calls = (("get_time", "{}"), ("get_time", '{"zone":"UTC"}'))

    async def scenario():
        engine = _scripted()
        await engine.load(str(model))
        engine.scripts.extend([dataclasses.replace(written("Let me look."), calls=calls)] * 2
                              + [Script(calls=calls)])
        called = await _events(engine, LONG, shape=AnswerShape(tools=TOOLS))
        untold = await _events(engine, LONG)
        cut = await _events(engine, SHORT, shape=AnswerShape(tools=TOOLS))
        await engine.shutdown()
        return called, untold, cut

    called, untold, cut = run(scenario)
    made = [e.tool_call for e in called if isinstance(e, Delta) and e.tool_call is not None]
    assert "".join(e.text for e in called[:-1]) == "Let me look." and called[-1].finish_reason == "stop"
    assert [(c.index, c.name, c.arguments) for c in made] == [(0, "get_time", "{}"), (1, "get_time", '{"zone":"UTC"}')]
    assert all(c.id.startswith("call_") for c in made) and made[0].id != made[1].id
    assert isinstance(called[-3], Delta) and called[-3].tool_call is made[0], "the calls come after the text"
    assert not any(isinstance(e, Delta) and e.tool_call for e in untold + cut), "no tools given, or cut short"


def test_cancel_pause_and_resume_act_between_two_tokens(kind: Kind, tiny_model: Path) -> None:
    async def scenario():
        engine = kind.make()
        await engine.load(str(tiny_model), context_length=1024)
        events: list[Any] = []

        async def consume(settings: GenerationSettings) -> None:
            async for event in engine.generate(HELLO, settings):
                events.append(event)

        try:
            answer = asyncio.create_task(consume(LONG))
            await _until(lambda: len(events) >= 5)
            engine.pause()
            await asyncio.sleep(0.5 * kind.scale)
            held = len(events)
            await asyncio.sleep(1.0 * kind.scale)
            still = len(events)
            engine.resume()
            await _until(lambda: len(events) > still + 3)
            engine.cancel()
            await answer
            cancelled = events[-1]
            events.clear()
            engine.pause()  # a paused engine writes one token, then holds; Stop still ends it
            paused_answer = asyncio.create_task(consume(LONG))
            await asyncio.sleep(1.0 * kind.scale)
            engine.cancel()
            await paused_answer
            held_cancel = events[-1]
            engine.resume()
            after = await _events(engine)
        finally:
            await engine.shutdown()
        return held, still, cancelled, held_cancel, after

    held, still, cancelled, held_cancel, after = run(scenario)
    assert held == still, "nothing arrives while paused"
    assert isinstance(cancelled, Done) and cancelled.finish_reason == "cancelled"
    assert still < cancelled.stats.tokens < 100_000
    assert held_cancel.finish_reason == "cancelled" and 1 <= held_cancel.stats.tokens <= 2
    assert after[-1].finish_reason == "length" and after[-1].stats.tokens == 12


def test_a_death_mid_answer_and_between_answers_is_said_and_the_next_request_starts_afresh(
        kind: Kind, tiny_model: Path) -> None:
    async def scenario():
        engine = kind.make()
        died: list[EngineDied] = []
        engine.on_died = died.append
        try:
            await engine.load(str(tiny_model), context_length=512)
            first_pid = engine.pid
            stream = engine.generate(HELLO, LONG)
            await _deltas(stream, 3)
            kind.kill(engine)
            with pytest.raises(EngineCrashed) as crashed:
                async for _ in stream:
                    pass
            gone = (engine.pid, engine.loaded, list(died))
            after = (await _events(engine))[-1]
            second_pid, restarts = engine.pid, engine.restarts
            kind.kill(engine)
            await _until(lambda: len(died) == 2)
            between = (engine.pid, engine.loaded)
            last = (await _events(engine))[-1]
        finally:
            await engine.shutdown()
        return crashed.value, gone, after, first_pid, second_pid, restarts, between, last, died

    crashed, gone, after, first_pid, second_pid, restarts, between, last, died = run(scenario)
    assert crashed.kind == "crashed" and crashed.exit_code == -9 and crashed.during == "generate"
    assert "stopped unexpectedly (exit code -9)" in crashed.message and "already written is kept" in crashed.message
    assert gone[:2] == (None, None) and len(gone[2]) == 1, "told once, before the answer raised"
    assert died[0] == EngineDied(-9, died[0].message) and "Your chats are kept" in died[0].message
    assert after.finish_reason == "length" and second_pid not in (None, first_pid) and restarts == 1
    assert between == (None, None) and "exit code -9" in died[1].message and not died[1].restart
    assert last.finish_reason == "length"


@pytest.mark.skipif(os.name == "nt", reason="SIGSTOP stands in for a hang")
def test_a_silent_engine_is_ended_mid_answer_and_a_paused_one_is_not(kind: Kind, tiny_model: Path) -> None:
    async def scenario():
        engine = kind.make()
        died: list[EngineDied] = []
        engine.on_died = died.append
        try:
            await engine.load(str(tiny_model), context_length=512)
            pid = engine.pid
            stream = engine.generate(HELLO, dataclasses.replace(SHORT, max_tokens=60))
            await _deltas(stream, 3)
            engine.pause()
            await asyncio.sleep(5.0 * kind.scale)  # more than twice hang_after: a paused engine answers pings
            engine.resume()
            finished = [event async for event in stream][-1]
            same = engine.pid == pid and engine.running
            stream = engine.generate(HELLO, LONG)
            await _deltas(stream, 3)
            kind.freeze(engine)
            frozen = time.monotonic()
            with pytest.raises(EngineCrashed) as crashed:
                async for _ in stream:
                    pass
            waited = time.monotonic() - frozen
            running = engine.pid is not None
        finally:
            await engine.shutdown()
        return finished, same, crashed.value, waited / kind.scale, running, died

    finished, same, crashed, waited, running, died = run(scenario)
    assert finished.finish_reason == "length" and same
    assert "stopped responding" in crashed.message and "next message starts a new engine" in crashed.message
    assert 1.5 < waited < 6 and not running
    assert len(died) == 1 and not died[0].restart and "stopped responding" in died[0].message


@pytest.mark.skipif(os.name == "nt", reason="SIGSTOP stands in for a hang")
def test_stop_ends_a_hung_engine_at_once_and_quitting_does_not_wait_for_one(kind: Kind, tiny_model: Path) -> None:
    async def scenario():
        engine = kind.make(hang_after=60.0)
        died: list[EngineDied] = []
        engine.on_died = died.append
        try:
            await engine.load(str(tiny_model), context_length=512)
            stream = engine.generate(HELLO, LONG)
            await _deltas(stream, 3)
            kind.freeze(engine)
            stopped = time.monotonic()
            engine.cancel()
            with pytest.raises(EngineCrashed) as crashed:
                async for _ in stream:
                    pass
            took = time.monotonic() - stopped
            await engine.load(str(tiny_model), context_length=512)
            kind.freeze(engine)
            quitting = time.monotonic()
            await engine.shutdown(timeout=10)
            quit_took = time.monotonic() - quitting
        finally:
            await engine.shutdown()
        return crashed.value, took / kind.scale, quit_took / kind.scale, engine.pid, died

    crashed, took, quit_took, pid, died = run(scenario)
    assert "did not respond to Stop" in crashed.message and took < 3
    assert len(died) == 1 and died[0].restart and "starting it again" in died[0].message
    assert quit_took < 2.5 and pid is None
