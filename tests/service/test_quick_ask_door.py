"""Quick ask's door on the scripted engine: a chat of its own, answered in the one line, the open chat untouched."""

from __future__ import annotations

import dataclasses

from app.core.conversation import Role
from app.service import events as ev
from app.service.doors.quick_ask import QuickAskDoor
from tests.helpers.scripted_answers import written
from tests.service.conftest import StartService, run, stored
from tests.helpers.scripted_engine import ScriptedEngine


def test_a_question_starts_a_chat_of_its_own_and_a_follow_up_continues_it(started_service: StartService) -> None:
    async def scenario() -> None:
        engine = ScriptedEngine()
        engine.scripts.extend([written("Kestrels hover."), written("They eat voles.")])
        async with started_service(engine=engine) as started:
            doors, events = started.doors, started.events
            open_before = doors.chat.conversation
            quick = QuickAskDoor(started.service)
            assert quick.ask("What do kestrels do?\nAnd why?")
            await events.until(lambda: events.of(ev.AnswerFinished), what="the first answer")
            first = quick.conversation_id
            assert first is not None and first != (open_before.id if open_before else None)
            [finished] = events.of(ev.AnswerFinished)
            assert finished.message.conversation_id == first and finished.message.text == "Kestrels hover."
            conversation = await doors.files.get_conversation(first)
            assert conversation.title == "What do kestrels do?"  # titled by the question's first line
            # The answer is finished a moment before its turn leaves the line (as the window's Stop turns back
            # into Ask): a follow-up asked in that moment is refused, as the window's Send would be.
            await events.until(lambda: not quick.busy, what="the turn to leave the line")
            assert quick.ask("What do they eat?")
            await events.until(lambda: len(events.of(ev.AnswerFinished)) == 2, what="the follow-up")
            assert quick.conversation_id == first, "a follow-up continues the same chat"
            texts = [(m.role, m.text) for m in await stored(started.service, first)]
            assert texts == [(Role.USER, "What do kestrels do?\nAnd why?"), (Role.ASSISTANT, "Kestrels hover."),
                             (Role.USER, "What do they eat?"), (Role.ASSISTANT, "They eat voles.")]
            # The engine was asked with the exchange's own history, not the open chat's.
            assert [m.content for m in engine.requests[-1].messages][-3:] == [
                "What do kestrels do?\nAnd why?", "Kestrels hover.", "What do they eat?"]
            # The main window's open chat is untouched: not switched, no message added to it.
            assert doors.chat.conversation == open_before and doors.chat.messages == []
            assert not events.of(ev.MessageAdded) and not events.of(ev.ConversationOpened)[1:]
            assert not [e for e in events.of(ev.BusyChanged) if e.busy], "the open chat's Send never turned to Stop"

    run(scenario)


def test_a_new_exchange_starts_another_chat_and_save_chats_off_deletes_the_one_over(
        started_service: StartService) -> None:
    async def scenario() -> None:
        engine = ScriptedEngine()
        engine.scripts.extend([written("One."), written("Two."), written("Three.")])
        async with started_service(engine=engine) as started:
            doors, events = started.doors, started.events
            settings = doors.settings.settings
            await doors.settings.update_settings(dataclasses.replace(
                settings, quick_ask=dataclasses.replace(settings.quick_ask, save_chats=False)))
            quick = QuickAskDoor(started.service)
            assert quick.ask("First question")
            await events.until(lambda: len(events.of(ev.AnswerFinished)) == 1)
            first = quick.conversation_id
            assert first is not None
            task = quick.new_exchange()
            assert task is not None
            await task
            assert quick.conversation_id is None
            assert first in [e.conversation_id for e in events.of(ev.ConversationRemoved)]
            assert first not in [c.id for c in await doors.files.read_all()], "gone from the history"
            # "Continue in Kestrel" keeps it whatever the setting says.
            assert quick.ask("Second question")
            await events.until(lambda: len(events.of(ev.AnswerFinished)) == 2)
            second = quick.hand_over()
            assert second is not None and second != first
            assert quick.new_exchange() is None  # nothing left to end
            assert second in [c.id for c in await doors.files.read_all()]

    run(scenario)


def test_with_chats_kept_a_new_exchange_keeps_the_chat(started_service: StartService) -> None:
    async def scenario() -> None:
        engine = ScriptedEngine()
        engine.scripts.append(written("Kept."))
        async with started_service(engine=engine) as started:
            quick = QuickAskDoor(started.service)
            assert quick.ask("Keep me")
            await started.events.until(lambda: started.events.of(ev.AnswerFinished))
            first = quick.conversation_id
            task = quick.new_exchange()
            assert task is not None
            await task
            assert first in [c.id for c in await started.doors.files.read_all()]

    run(scenario)


def test_stop_ends_the_exchanges_answer_and_leaves_the_open_chat_free(started_service: StartService) -> None:
    async def scenario() -> None:
        engine = ScriptedEngine(token_s=0.05)  # long enough to still be writing when stopped
        async with started_service(engine=engine) as started:
            doors, events = started.doors, started.events
            quick = QuickAskDoor(started.service)
            assert quick.ask("Tell me everything")
            assert quick.busy and not doors.chat.open_chat_busy
            assert not quick.ask("Again"), "one question at a time in an exchange"
            await events.until(lambda: events.of(ev.TextGrew), what="the answer to start")
            doors.chat.stop()  # the main window's Stop is for its own chat only
            await events.until(lambda: len(events.of(ev.TextGrew)) > 3, what="the answer to go on")
            assert quick.busy
            quick.stop()
            await events.until(lambda: not quick.busy, what="the stop")
            [stopped] = events.of(ev.AnswerFinished)
            assert stopped.message.conversation_id == quick.conversation_id
            assert stopped.message.stats is not None and stopped.message.stats.finish_reason.value == "cancelled"

    run(scenario)


def test_a_new_exchange_asked_while_its_first_question_is_saved_ends_once_saved(
        started_service: StartService) -> None:
    """Ended in the same moment as asked: the chat is closed once its message is saved, with no
    "That chat is gone" for a message deleted under it."""
    async def scenario() -> None:
        engine = ScriptedEngine(token_s=0.05)
        async with started_service(engine=engine) as started:
            doors, events = started.doors, started.events
            settings = doors.settings.settings
            await doors.settings.update_settings(dataclasses.replace(
                settings, quick_ask=dataclasses.replace(settings.quick_ask, save_chats=False)))
            quick = QuickAskDoor(started.service)
            assert quick.ask("Gone at once")
            assert quick.new_exchange() is None  # the first message is still being saved
            await events.until(lambda: events.of(ev.ConversationRemoved), what="the exchange deleted")
            assert not events.of(ev.Problem) and not events.of(ev.SendFailed)
            assert await doors.files.read_all() == []

    run(scenario)


def test_quitting_deletes_an_exchange_not_to_keep_before_the_history_closes(started_service: StartService) -> None:
    async def scenario() -> tuple[int | None, list[int]]:
        engine = ScriptedEngine()
        engine.scripts.extend([written("One.")])
        async with started_service(engine=engine) as started:
            doors, events = started.doors, started.events
            settings = doors.settings.settings
            await doors.settings.update_settings(dataclasses.replace(
                settings, quick_ask=dataclasses.replace(settings.quick_ask, save_chats=False)))
            quick = QuickAskDoor(started.service)
            assert quick.ask("A question asked just before Kestrel quits")
            await events.until(lambda: len(events.of(ev.AnswerFinished)) == 1)
            asked = quick.conversation_id
        async with started_service(install_model=False, start="open") as again:
            return asked, [c.id for c in await again.doors.files.read_all()]

    asked, kept = run(scenario)
    assert asked is not None and asked not in kept
