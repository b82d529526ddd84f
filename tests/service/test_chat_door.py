"""The window's doors, chiefly the chat door, driven as a front end drives them, on the scripted engine, without Qt."""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import subprocess
import sys

from app.core.conversation import MessageState, Role
from app.core.store.history import HistoryStore
from app.engine.protocol import ChatMessage, Delta, Done
from app.service import events as ev
from app.service.models.engine_queue import Withdrawn
from tests.helpers.disks import small_disk
from tests.helpers.scripted_answers import scripted_text
from tests.helpers.scripted_engine import ScriptedEngine
from tests.service.conftest import (LONG, SMALL, engine_line, history, run, settings_file, stored, writing)


async def _answered(started, text: str):
    assert started.doors.chat.send(text)
    await started.doors.chat.wait_idle()
    return started.doors.chat.messages[-1]


async def _streaming(started, recorder, text: str, chars: int) -> None:
    """Send text and wait until more than chars of the answer have streamed."""
    assert started.doors.chat.send(text)
    await recorder.until(lambda: recorder.of(ev.AnswerStarted), what="the answer")
    answer_id = recorder.of(ev.AnswerStarted)[-1].message.id
    await recorder.until(lambda: len(recorder.text_of(answer_id)) > chars, what="some text")


def test_the_service_and_the_cli_run_without_qt() -> None:
    # In a fresh process: this one may have Qt loaded by other tests.
    code = ("import sys, app.service.root, app.service.doors.window, app.cli.chat; "
            "sys.exit(1 if any(m.startswith(('PySide6', 'qasync')) for m in sys.modules) else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_send_streams_saves_and_reports_in_order(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            service, doors, recorder = started.service, started.doors, started.events
            start = len(recorder.events)
            answer = await _answered(started, "Hello there")
            kinds = [type(e).__name__ for e in recorder.events[start:]
                     if not isinstance(e, (ev.TextGrew, ev.ActivityChanged, ev.ConversationChanged,
                                       ev.AnswerQueueChanged))]
            assert kinds == ["BusyChanged", "MessageAdded", "MessageAdded", "AnswerStarted", "AnswerFinished",
                             "BusyChanged"]
            assert answer.state == MessageState.COMPLETE and answer.stats.tokens == 24
            assert answer.stats.device == "CPU" and answer.stats.finish_reason == "length"
            assert answer.text == scripted_text(24) and recorder.text_of(answer.id) == answer.text
            user, saved = await stored(service, answer.conversation_id)
            assert (user.role, user.text) == (Role.USER, "Hello there") and saved == answer
            assert doors.chat.conversation.title == "Hello there"
            assert started.engine.requests[-1].messages == (ChatMessage("user", "Hello there"),)

    run(scenario)


def test_a_message_sent_while_the_model_loads_waits_then_is_answered(started_service) -> None:
    async def scenario():
        engine = ScriptedEngine()
        engine.hold_loads()
        async with started_service(engine=engine, start=None) as started:
            service, doors, recorder = started.service, started.doors, started.events
            starting = asyncio.ensure_future(service.start_up())
            await recorder.until(lambda: doors.model.model_state == ev.ModelState.LOADING, what="loading")
            assert doors.chat.send("Early bird")
            await recorder.until(lambda: doors.chat.answering_id is not None, what="the message to wait")
            await recorder.until(lambda: any("when the model is ready" in e.text
                                             for e in recorder.of(ev.ActivityChanged)), what="the wait said")
            assert doors.model.model_state == ev.ModelState.LOADING and not engine.requests[1:]
            engine.release_loads()
            await starting
            await doors.chat.wait_idle()
            assert [m.role for m in doors.chat.messages] == [Role.USER, Role.ASSISTANT]
            assert doors.chat.messages[-1].state == MessageState.COMPLETE

    run(scenario)


def test_stop_keeps_what_was_written(started_service) -> None:
    async def scenario():
        async with started_service(LONG) as started:
            service, doors, recorder = started.service, started.doors, started.events
            await _streaming(started, recorder, "Tell me everything", 40)
            doors.chat.stop()
            await doors.chat.wait_idle()
            answer = doors.chat.messages[-1]
            assert answer.stats.finish_reason == "cancelled" and len(answer.text) > 40
            assert answer.text == scripted_text(answer.stats.tokens)
            assert (await stored(service, answer.conversation_id))[-1].text == answer.text

    run(scenario)


def test_regenerate_and_edit_replace_what_followed(started_service) -> None:
    async def scenario():
        async with started_service(dataclasses.replace(SMALL, temperature=1.0)) as started:
            service, doors, recorder = started.service, started.doors, started.events
            first = await _answered(started, "First question")
            replaced = await _answered(started, "Second question")
            assert doors.chat.regenerate()
            await doors.chat.wait_idle()
            rows = doors.chat.messages
            assert len(rows) == 4 and rows[-1].state == MessageState.COMPLETE and rows[-1].id != replaced.id
            assert [m.id for m in await stored(service, first.conversation_id)] == [m.id for m in rows]
            assert doors.chat.edit_and_resend(rows[0].id, "First question, edited")
            await doors.chat.wait_idle()
            user, answer = doors.chat.messages
            assert user.text == "First question, edited" and answer.state == MessageState.COMPLETE
            assert [m.text for m in await stored(service, user.conversation_id)][0] == user.text
            removed = recorder.of(ev.MessagesRemoved)
            assert [r.from_message_id for r in removed] == [replaced.id, rows[0].id]
            assert started.engine.requests[-1].messages == (ChatMessage("user", "First question, edited"),)

    run(scenario)


def test_engine_killed_mid_answer_keeps_the_text_and_the_next_send_works(started_service) -> None:
    async def scenario():
        async with started_service(LONG) as started:
            service, doors, recorder, engine = started.service, started.doors, started.events, started.engine
            await _streaming(started, recorder, "Keep talking", 30)
            first_pid = engine.pid
            engine.die()
            await doors.chat.wait_idle()
            cut = recorder.of(ev.AnswerInterrupted)[0]
            assert cut.reason == ev.InterruptReason.ENGINE_DIED and "stopped unexpectedly" in cut.detail
            assert cut.message.state == MessageState.INTERRUPTED and len(cut.message.text) > 30
            stored_cut = (await stored(service, cut.message.conversation_id))[-1]
            assert stored_cut.text == cut.message.text and stored_cut.state == MessageState.INTERRUPTED
            await doors.chat.set_conversation_settings("", dataclasses.replace(SMALL, max_tokens=8))
            answer = await _answered(started, "Are you back?")
            assert answer.state == MessageState.COMPLETE and answer.id != cut.message.id
            assert engine.pid not in (None, first_pid) and engine.restarts == 1
            assert doors.model.model_state == ev.ModelState.READY

    run(scenario)


def test_engine_dying_between_answers_is_reported_when_it_happens(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            doors, recorder = started.doors, started.events
            await _answered(started, "Hello")
            started.engine.die()
            # Nothing is sent: the report comes from the engine's death itself.
            await recorder.until(lambda: doors.model.model_state == ev.ModelState.FAILED, what="the report")
            failed = recorder.of(ev.ModelStateChanged)[-1]
            assert "stopped unexpectedly" in failed.detail and "exit code -9" in failed.detail
            answer = await _answered(started, "Still there?")
            assert answer.state == MessageState.COMPLETE and doors.model.model_state == ev.ModelState.READY

    run(scenario)


def test_two_front_ends_share_one_engine_in_turns_without_interleaving(started_service) -> None:
    async def scenario():
        async with started_service(dataclasses.replace(SMALL, max_tokens=60)) as started:
            service, doors, recorder = started.service, started.doors, started.events
            timeline: list[tuple[str, str]] = []
            service.subscribe(lambda e: isinstance(e, ev.TextGrew) and timeline.append(("window", "delta")))
            doors.chat.send("The window asks first")
            await recorder.until(lambda: writing(service), what="the window's answer")
            # A second front end (the API server, later) asks while the window's answer runs.
            other = engine_line(service).request([ChatMessage("user", "The other asks")], SMALL)
            seen = []
            async for event in other.events():
                seen.append(event)
                if isinstance(event, Delta):
                    timeline.append(("other", "delta"))
            assert isinstance(seen[0], ev.Queued) and seen[0].position == 1
            assert isinstance(seen[-1], Done) and seen[-1].stats.tokens > 0
            await doors.chat.wait_idle()
            owners = [owner for owner, _ in timeline]
            first_other = owners.index("other")
            assert "window" in owners[:first_other] and "window" not in owners[first_other:], "interleaved"

    run(scenario)


def test_a_waiting_request_can_be_withdrawn(started_service) -> None:
    async def scenario():
        async with started_service(LONG) as started:
            service, doors, recorder = started.service, started.doors, started.events
            doors.chat.send("Long one")
            await recorder.until(lambda: writing(service), what="the window's answer")
            waiting = engine_line(service).request([ChatMessage("user", "Never mind")], SMALL)
            events = waiting.events()
            assert isinstance(await events.__anext__(), ev.Queued)
            waiting.cancel()
            assert isinstance(await events.__anext__(), Withdrawn)
            await events.aclose()
            doors.chat.stop()
            await doors.chat.wait_idle()
            assert not engine_line(service).busy
            assert all(r.messages[-1].content != "Never mind" for r in started.engine.requests[1:])

    run(scenario)


def test_a_long_chat_leaves_out_old_turns(started_service) -> None:
    async def scenario():
        async with started_service(dataclasses.replace(SMALL, context_length=512, max_tokens=16)) as started:
            service, doors = started.service, started.doors
            await doors.chat.set_conversation_settings("", dataclasses.replace(SMALL, context_length=512,
                                                                                max_tokens=16))
            conversation_id = doors.chat.conversation.id

            def fill(store: HistoryStore) -> None:
                with store.transaction():
                    for i in range(40):
                        store.add_message(conversation_id, Role.USER, f"question {i} " + "the cat sat " * 8)
                        store.add_message(conversation_id, Role.ASSISTANT, f"answer {i} " + "a dog ran " * 8)

            await history(service, fill)
            await doors.chat.open_conversation(conversation_id)
            answer = await _answered(started, "And now?")
            assert answer.state == MessageState.COMPLETE and answer.stats.messages_left_out > 0
            assert started.engine.requests[-1].trim_history, "the engine was asked to leave turns out"

    run(scenario)


def test_a_full_disk_mid_answer_stops_it_and_says_so(started_service, tmp_path, monkeypatch) -> None:
    with small_disk(tmp_path / "small disk", "4m") as disk:
        monkeypatch.setenv("KESTREL_HOME", str(disk / "home"))

        async def scenario():
            async with started_service(dataclasses.replace(LONG, context_length=2048)) as started:
                doors, recorder = started.doors, started.events
                await _streaming(started, recorder, "Fill the disk", 20)
                (disk / "filler").write_bytes(b"\0" * shutil.disk_usage(disk).free)
                await doors.chat.wait_idle()
                cut = recorder.of(ev.AnswerInterrupted)[0]
                assert cut.reason == ev.InterruptReason.DISK and len(cut.message.text) > 20
                problem = recorder.of(ev.Problem)[-1].text
                assert "full" in problem and "not saved" in problem
                assert doors.chat.answering_id is None and not doors.chat.open_chat_busy

        run(scenario)


def test_search_rename_and_delete_go_through_the_doors(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            doors, recorder = started.doors, started.events
            await _answered(started, "Apples are red")
            apples = doors.chat.conversation.id
            doors.chat.new_conversation()
            await _answered(started, "Bananas are yellow")
            assert await doors.history.search("APPLES") == {apples}
            assert await doors.history.search("  ") is None
            assert await doors.history.rename_conversation(apples, "Fruit talk")
            renamed = recorder.of(ev.ConversationChanged)[-1]
            assert renamed.conversation.title == "Fruit talk" and not renamed.to_top
            assert await doors.chat.delete_conversation(apples)
            assert recorder.of(ev.ConversationRemoved)[-1].conversation_id == apples
            assert await doors.history.search("apples") == set()

    run(scenario)


def test_settings_are_written_only_when_they_change(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            service, doors = started.service, started.doors
            path = settings_file(service)
            before = path.stat().st_mtime_ns
            await doors.settings.update_settings(doors.settings.settings)
            assert path.stat().st_mtime_ns == before
            await doors.settings.update_settings(dataclasses.replace(doors.settings.settings, theme="dark"))
            assert path.stat().st_mtime_ns != before and '"dark"' in path.read_text()

    run(scenario)


def test_a_context_longer_than_the_model_knows_loads_once_not_every_answer(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            doors, engine = started.doors, started.engine
            # The tiny model was trained on 2048 tokens: the engine clamps, and must not
            # reload the model before every answer because of it.
            await doors.chat.set_conversation_settings("", dataclasses.replace(SMALL, context_length=8192))
            await _answered(started, "One")
            loaded = engine.loaded
            assert loaded.context_length == 2048
            answer = await _answered(started, "Two")
            assert engine.loaded is loaded, "the model was reloaded for nothing"
            assert answer.stats.prompt_tokens_evaluated < answer.stats.prompt_tokens

    run(scenario)


def test_closing_while_the_model_loads_ends_cleanly(started_service) -> None:
    async def scenario():
        engine = ScriptedEngine()
        engine.hold_loads()
        async with started_service(engine=engine, start=None) as started:
            service, doors, recorder = started.service, started.doors, started.events
            starting = service.spawn(service.start_up())
            await recorder.until(lambda: doors.model.model_state == ev.ModelState.LOADING, what="loading")
            await started.shutdown()
            assert starting.done()
            assert started.engine.pid is None
            assert starting.cancelled() or starting.exception() is None

    run(scenario)


def test_text_utf8_cannot_hold_is_kept_with_a_replacement_character(started_service) -> None:
    """A lone surrogate made the history refuse the message and the send task die quietly,
    so wait_idle() never returned."""
    async def scenario():
        async with started_service() as started:
            service, doors = started.service, started.doors
            answer = await asyncio.wait_for(_answered(started, "broken \udcff paste"), 60)
            user = doors.chat.messages[-2]
            assert user.text == "broken \ufffd paste" and answer.state == MessageState.COMPLETE
            assert (await stored(service, user.conversation_id))[0].text == "broken \ufffd paste"

    run(scenario)


def test_a_hung_engine_is_said_and_stop_starts_it_again(started_service) -> None:
    async def scenario():
        engine = ScriptedEngine(hang_after=60.0, stop_grace=0.3)
        async with started_service(LONG, engine=engine) as started:
            doors, recorder = started.doors, started.events
            await _streaming(started, recorder, "Keep talking", 20)
            first_pid = engine.pid
            engine.hang()
            doors.chat.stop()
            await doors.chat.wait_idle()
            cut = recorder.of(ev.AnswerInterrupted)[-1]
            assert cut.reason == ev.InterruptReason.ENGINE_DIED and "did not respond to Stop" in cut.detail
            assert cut.message.state == MessageState.INTERRUPTED and len(cut.message.text) > 20
            # Started again without waiting for the next message.
            await recorder.until(lambda: doors.model.model_state == ev.ModelState.READY
                                 and engine.pid not in (None, first_pid), what="the new engine")
            assert any("did not respond to Stop" in p.text for p in recorder.of(ev.Problem))
            await doors.chat.set_conversation_settings("", dataclasses.replace(SMALL, max_tokens=6))
            answer = await _answered(started, "Back?")
            assert answer.state == MessageState.COMPLETE and answer.text == scripted_text(6)

    run(scenario)
