"""EngineClient against a real engine process running real llama.cpp on the tiny model."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from app.core.generation import GenerationSettings
from app.engine.failures import BadModelFile, PromptTooLong
from app.engine.protocol import ChatMessage, Delta, Done
from app.service.models.client import EngineClient
from app.service.models.engine_errors import EngineCrashed, EngineError
from tests.helpers.engine import answer, load_error
from tests.helpers.models import truncated_copy
from tests.helpers.tiny_gguf import EOS_ID, IM_END_ID, build_tiny_gguf

LONG = GenerationSettings(max_tokens=400, temperature=0.0, seed=1)
SHORT = GenerationSettings(max_tokens=12, temperature=0.0, seed=1)
HELLO = (ChatMessage("user", "Hello there"),)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, timeout=120))


async def _loaded(tiny_model: Path, **kwargs) -> EngineClient:
    client = EngineClient()
    await client.load(str(tiny_model), **kwargs)
    return client


async def _collect(client: EngineClient, messages=HELLO, settings=SHORT) -> tuple[str, Done]:
    return await answer(client, messages, settings)


def test_load_reports_device_context_and_threads(tiny_model: Path) -> None:
    async def scenario():
        client = EngineClient()
        try:
            loaded = await client.load(str(tiny_model), context_length=512, threads=1)
            assert loaded.device == "CPU"
            assert loaded.context_length == 512
            assert loaded.threads == 1
            assert loaded.load_ms > 0
            assert loaded.architecture == "llama"
            assert loaded.chat_format == "embedded"
            assert client.pid is not None and client.pid != os.getpid()
        finally:
            await client.shutdown()
        assert client.pid is None
    run(scenario())


def test_generate_streams_deltas_then_done_with_stats(tiny_model: Path) -> None:
    async def scenario():
        client = await _loaded(tiny_model, context_length=512)
        try:
            events = [e async for e in client.generate(HELLO, SHORT)]
        finally:
            await client.shutdown()
        deltas, done = events[:-1], events[-1]
        assert isinstance(done, Done) and all(isinstance(e, Delta) for e in deltas)
        assert len(deltas) >= 2, "the answer must arrive in pieces, not at once"
        assert done.finish_reason == "length"
        stats = done.stats
        assert stats.tokens == 12
        assert stats.tokens_per_s > 0 and stats.ttft_ms > 0
        assert stats.prompt_tokens == stats.prompt_tokens_evaluated > 0
        assert stats.device == "CPU"
    run(scenario())


def test_same_seed_gives_the_same_answer(tiny_model: Path) -> None:
    async def scenario():
        client = await _loaded(tiny_model, context_length=512)
        try:
            settings = GenerationSettings(max_tokens=20, temperature=0.9, seed=42)
            first, _ = await _collect(client, HELLO, settings)
            await client.reset()
            second, _ = await _collect(client, HELLO, settings)
        finally:
            await client.shutdown()
        assert first == second and first
    run(scenario())


def test_cancel_stops_between_two_tokens(tiny_model: Path) -> None:
    async def scenario():
        client = await _loaded(tiny_model, context_length=1024)
        deltas = 0
        try:
            async for event in client.generate(HELLO, LONG):
                if isinstance(event, Delta):
                    deltas += 1
                    if deltas == 5:
                        client.cancel()
                else:
                    done = event
            # The engine takes the next request at once.
            _, after = await _collect(client)
        finally:
            await client.shutdown()
        assert done.finish_reason == "cancelled"
        assert 5 <= done.stats.tokens < 400
        assert after.finish_reason == "length"
    run(scenario())


def test_leaving_the_stream_early_cancels_it(tiny_model: Path) -> None:
    async def scenario():
        client = await _loaded(tiny_model, context_length=1024)
        try:
            stream = client.generate(HELLO, LONG)
            async for event in stream:
                break
            await stream.aclose()
            text, done = await _collect(client)
        finally:
            await client.shutdown()
        assert done.finish_reason == "length" and done.stats.tokens == 12
    run(scenario())


def test_pause_holds_generation_until_resume(tiny_model: Path) -> None:
    async def scenario():
        client = await _loaded(tiny_model, context_length=512)
        events = []

        async def consume():
            async for event in client.generate(HELLO, SHORT):
                events.append(event)

        try:
            client.pause()
            consumer = asyncio.create_task(consume())
            await asyncio.sleep(1.0)
            seen_while_paused = len(events)
            client.resume()
            await consumer
        finally:
            await client.shutdown()
        # Paused between two tokens: at most the first one got out.
        assert seen_while_paused <= 1
        assert isinstance(events[-1], Done) and events[-1].stats.tokens == 12
    run(scenario())


def test_engine_killed_mid_answer_keeps_the_text_and_restarts(tiny_model: Path) -> None:
    async def scenario():
        client = await _loaded(tiny_model, context_length=1024)
        first_pid = client.pid
        parts = []
        try:
            with pytest.raises(EngineCrashed) as crashed:
                async for event in client.generate(HELLO, LONG):
                    parts.append(event.text)
                    if len(parts) == 3:
                        os.kill(first_pid, signal.SIGKILL)
            text, done = await _collect(client)
            second_pid = client.pid
        finally:
            await client.shutdown()
        assert crashed.value.exit_code == -signal.SIGKILL
        assert "stopped unexpectedly" in crashed.value.message
        assert len("".join(parts)) > 0
        assert second_pid != first_pid and client.restarts == 1
        assert done.finish_reason == "length"
    run(scenario())


def test_second_turn_reuses_the_kv_cache(tiny_model: Path) -> None:
    async def scenario():
        client = await _loaded(tiny_model, context_length=1024)
        try:
            answer, first = await _collect(client)
            turn2 = HELLO + (ChatMessage("assistant", answer), ChatMessage("user", "And then?"))
            _, second = await _collect(client, turn2)
        finally:
            await client.shutdown()
        s1, s2 = first.stats, second.stats
        assert s1.prompt_tokens_evaluated == s1.prompt_tokens
        assert s2.prompt_tokens > s1.prompt_tokens
        # At least the whole first prompt came from the cache.
        assert s2.prompt_tokens_evaluated <= s2.prompt_tokens - s1.prompt_tokens
    run(scenario())


def test_prompt_longer_than_the_context_is_refused_with_counts(tiny_model: Path) -> None:
    async def scenario():
        client = await _loaded(tiny_model, context_length=256)
        try:
            with pytest.raises(EngineError) as refused:
                await _collect(client, (ChatMessage("user", "the cat sat " * 400),))
            _, done = await _collect(client)
        finally:
            await client.shutdown()
        assert refused.value.kind == "context_overflow"
        failure = refused.value.failure
        assert isinstance(failure, PromptTooLong)
        assert failure.context_length == 256 and failure.prompt_tokens > 256
        assert "tokens but the context holds 256" in refused.value.message
        assert done.finish_reason == "length"
    run(scenario())


def test_generate_before_any_load_says_to_choose_a_model() -> None:
    async def scenario():
        client = EngineClient()
        with pytest.raises(EngineError) as refused:
            await _collect(client)
        await client.shutdown()
        assert refused.value.kind == "no_model"
    run(scenario())


@pytest.mark.parametrize("make, problem", [
    (lambda d, m: d / "missing.gguf", "missing"),
    (lambda d, m: _write(d / "empty.gguf", b""), "empty"),
    (lambda d, m: _write(d / "noise.gguf", os.urandom(4096)), "not_gguf"),
    (lambda d, m: truncated_copy(m, d / "cut.gguf", 0.6), "truncated"),
])
def test_bad_model_files_are_refused_and_the_engine_stays_up(tiny_model: Path, tmp_path: Path, make, problem) -> None:
    bad = make(tmp_path, tiny_model)

    async def scenario():
        client = EngineClient()
        try:
            with pytest.raises(EngineError) as refused:
                await client.load(str(bad))
            pid = client.pid
            await client.load(str(tiny_model), context_length=256)
            assert client.pid == pid, "a bad file must not cost an engine restart"
        finally:
            await client.shutdown()
        assert refused.value.kind == "model_file"
        assert isinstance(refused.value.failure, BadModelFile) and refused.value.failure.problem == problem
        assert bad.name in refused.value.message
    run(scenario())


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_long_conversation_leaves_out_its_oldest_turns_when_asked(tiny_model: Path) -> None:
    turns = []
    for i in range(60):
        turns += [ChatMessage("user", f"question {i} " + "the cat sat " * 10),
                  ChatMessage("assistant", f"answer {i} " + "a dog ran " * 10)]
    conversation = (ChatMessage("system", "You are terse."), *turns, ChatMessage("user", "last one"))

    async def scenario():
        client = await _loaded(tiny_model, context_length=512)
        try:
            with pytest.raises(EngineError):
                await _collect(client, conversation)
            events = [e async for e in client.generate(conversation, SHORT, trim_history=True)]
        finally:
            await client.shutdown()
        return events[-1]

    done = asyncio.run(scenario())
    left_out = done.stats.messages_left_out
    assert left_out % 2 == 0 and 0 < left_out < len(turns)
    # What was kept fits with room for the answer, and nothing more could have been kept.
    assert done.stats.prompt_tokens + 12 <= 512
    assert done.finish_reason == "length"


def test_gguf_of_an_unknown_architecture_says_why_llama_cpp_refused(tiny_model: Path, tmp_path: Path) -> None:
    # Same length, so the header stays well formed: only llama.cpp can object.
    data = tiny_model.read_bytes().replace(b"\x05\x00\x00\x00\x00\x00\x00\x00llama", b"\x05\x00\x00\x00\x00\x00\x00\x00xyzzy", 1)
    odd = _write(tmp_path / "odd arch.gguf", data)

    error = load_error(odd)
    assert error.kind == "model_load"
    assert "unknown model architecture: 'xyzzy'" in error.message and "odd arch.gguf" in error.message


def test_cancel_works_after_an_earlier_stream_was_left_unclosed(tiny_model: Path) -> None:
    # _collect returns on Done without exhausting the generator; Python closes it
    # later, possibly while the next answer streams. That must not break cancel.
    async def scenario():
        client = await _loaded(tiny_model, context_length=1024)
        try:
            await _collect(client)
            deltas = 0
            async for event in client.generate(HELLO, LONG):
                if isinstance(event, Delta):
                    deltas += 1
                    await asyncio.sleep(0)  # let the old generator's finaliser run
                    if deltas == 3:
                        client.cancel()
                else:
                    return event
        finally:
            await client.shutdown()

    assert run(scenario()).finish_reason == "cancelled"


def test_engine_dying_while_loading_says_so_and_the_next_load_works(tiny_model: Path) -> None:
    async def scenario():
        client = EngineClient()
        try:
            await client.start()
            loading = asyncio.create_task(client.load(str(tiny_model)))
            await asyncio.sleep(0.05)  # the engine is probing the machine or loading now
            os.kill(client.pid, signal.SIGKILL)
            with pytest.raises(EngineCrashed) as crashed:
                await loading
            loaded = await client.load(str(tiny_model), context_length=256)
        finally:
            await client.shutdown()
        return crashed.value, loaded

    crashed, loaded = run(scenario())
    assert crashed.during == "load" and "stopped while loading" in crashed.message
    assert loaded.context_length == 256


def test_a_stop_string_ends_the_answer_before_it_shows(tiny_model: Path) -> None:
    greedy = GenerationSettings(max_tokens=40, temperature=0.0, seed=5)

    async def scenario():
        client = await _loaded(tiny_model, context_length=512)
        try:
            full, _ = await _collect(client, HELLO, greedy)
            stop = full[len(full) // 2: len(full) // 2 + 6]
            await client.reset()
            parts = []
            async for event in client.generate(HELLO, greedy, stop=[stop]):
                if isinstance(event, Delta):
                    parts.append(event.text)
                else:
                    done = event
        finally:
            await client.shutdown()
        return full, stop, "".join(parts), done

    full, stop, text, done = run(scenario())
    assert stop and stop not in text
    assert text == full[: full.index(stop)]
    assert done.finish_reason == "stop" and done.stats.tokens < 40


@pytest.mark.parametrize("token", [EOS_ID, IM_END_ID], ids=["eos", "eot"])
def test_the_models_end_of_generation_tokens_end_the_answer(tmp_path: Path, token: int) -> None:
    model = build_tiny_gguf(tmp_path / "stops at once.gguf", always=token)

    async def scenario():
        client = await _loaded(model, context_length=256)
        try:
            return await _collect(client, HELLO, GenerationSettings(max_tokens=50))
        finally:
            await client.shutdown()

    text, done = run(scenario())
    assert text == "" and done.finish_reason == "stop" and done.stats.tokens == 0
