"""Answers across chats: a message sent while another chat is answered is saved at once and
answered in its turn, open or not; Stop, delete, regenerate and edit know which chat they mean."""

from __future__ import annotations

import dataclasses

from app.core.conversation import MessageState, Role
from app.core.store.history import HistoryStore
from app.service import events as ev
from tests.helpers.scripted_answers import scripted_text
from tests.service.conftest import LONG, history, run, stored, writing


async def _writing_in(started, recorder, text: str) -> int:
    """Send in the open chat and wait until its answer streams; the chat's id."""
    assert started.doors.chat.send(text)
    await recorder.until(lambda: writing(started.service) and recorder.of(ev.TextGrew), what="the answer to stream")
    return started.doors.chat.answering_id


async def _short(started) -> None:
    """The open chat answers in a few tokens."""
    system, settings = started.doors.chat.conversation_settings()
    await started.doors.chat.set_conversation_settings(system, dataclasses.replace(settings, max_tokens=6))


def test_a_message_in_another_chat_is_saved_at_once_and_answered_after(started_service) -> None:
    async def scenario():
        async with started_service(LONG) as started:
            service, doors, recorder = started.service, started.doors, started.events
            first = await _writing_in(started, recorder, "Chat A talks at length")
            doors.chat.new_conversation()
            assert not doors.chat.open_chat_busy and recorder.of(ev.BusyChanged)[-1].busy is False
            await _short(started)
            second = doors.chat.conversation.id
            assert doors.chat.send("Chat B asks meanwhile")
            assert doors.chat.open_chat_busy and recorder.of(ev.BusyChanged)[-1].busy is True
            await recorder.until(lambda: doors.chat.waiting_ids == (second,), what="B to wait")
            assert doors.chat.answering_id == first
            # Saved at once, not when its turn comes; shown in the open chat too.
            await recorder.until(lambda: doors.chat.messages, what="B's message")
            assert doors.chat.answering_id == first, "A is still being answered"
            [saved] = await stored(service, second)
            assert (saved.role, saved.text) == (Role.USER, "Chat B asks meanwhile")
            assert [m.text for m in doors.chat.messages] == ["Chat B asks meanwhile"]
            assert not doors.chat.send("Twice while waiting"), "one waiting answer per chat"
            await doors.chat.open_conversation(first)  # B's answer goes on behind the user's back
            assert recorder.of(ev.BusyChanged)[-1].busy is True, "said again for the chat opened"
            doors.chat.stop()  # the open chat: A's answer, as written so far
            await doors.chat.wait_idle()
            user, answer = await stored(service, second)
            assert answer.role == Role.ASSISTANT and answer.state == MessageState.COMPLETE and answer.text
            assert answer.text == scripted_text(6), "B's answer, as its own chat's settings asked"
            a_answer = (await stored(service, first))[-1]
            assert a_answer.stats.finish_reason == "cancelled"
            assert all(m.conversation_id == first for m in doors.chat.messages), "B's answer is not shown in A"
            lines = [(e.answering, e.waiting) for e in recorder.of(ev.AnswerQueueChanged)]
            assert lines[-4:] == [(first, ()), (first, (second,)), (second, ()), (None, ())]
            b_activity = [e for e in recorder.of(ev.ActivityChanged) if e.conversation_id == second]
            assert b_activity and b_activity[-1].text == "Writing…"
            assert recorder.of(ev.ActivityChanged)[-1] == ev.ActivityChanged("Idle", None)
            assert recorder.of(ev.BusyChanged)[-1].busy is False

    run(scenario)


def test_stop_takes_a_waiting_chat_out_of_line_and_regenerate_answers_it_later(started_service) -> None:
    async def scenario():
        async with started_service(LONG) as started:
            service, doors, recorder = started.service, started.doors, started.events
            first = await _writing_in(started, recorder, "A long one")
            doors.chat.new_conversation()
            await _short(started)
            second = doors.chat.conversation.id
            assert doors.chat.send("Never mind")
            await recorder.until(lambda: doors.chat.waiting_ids == (second,) and doors.chat.messages, what="B to wait")
            doors.chat.stop(second)
            assert doors.chat.waiting_ids == () and doors.chat.answering_id == first and not doors.chat.open_chat_busy
            assert recorder.of(ev.BusyChanged)[-1].busy is False
            [kept] = await stored(service, second)
            assert kept.text == "Never mind", "its message stays, unanswered"
            # Regenerate answers a last message left unanswered, waiting its turn again.
            assert doors.chat.regenerate() and doors.chat.open_chat_busy
            await recorder.until(lambda: doors.chat.waiting_ids == (second,), what="B to wait again")
            doors.chat.stop(first)
            await doors.chat.wait_idle()
            user, answer = await stored(service, second)
            assert user.id == kept.id and answer.state == MessageState.COMPLETE
            assert [m.id for m in doors.chat.messages] == [user.id, answer.id]

    run(scenario)


def test_regenerate_and_edit_in_another_chat_wait_their_turn(started_service) -> None:
    async def scenario():
        async with started_service(LONG) as started:
            service, doors, recorder = started.service, started.doors, started.events
            await _short(started)
            assert doors.chat.send("B first")
            await doors.chat.wait_idle()
            second = doors.chat.conversation.id
            old_user, old_answer = doors.chat.messages
            doors.chat.new_conversation()
            first = await _writing_in(started, recorder, "A long one")
            await doors.chat.open_conversation(second)
            assert doors.chat.regenerate(), "queued, not refused"
            await recorder.until(lambda: len(doors.chat.messages) == 1, what="the old answer to go")
            assert doors.chat.waiting_ids == (second,) and doors.chat.answering_id == first
            assert [m.id for m in doors.chat.messages] == [old_user.id], "the old answer goes at once"
            assert not doors.chat.edit_and_resend(old_user.id, "no"), "this chat already waits"
            doors.chat.stop(first)
            await doors.chat.wait_idle()
            user, answer = await stored(service, second)
            assert user.id == old_user.id and answer.id != old_answer.id and answer.state == MessageState.COMPLETE
            assert doors.chat.edit_and_resend(user.id, "B, edited")
            await doors.chat.wait_idle()
            assert [m.text for m in doors.chat.messages][0] == "B, edited"

    run(scenario)


def test_deleting_a_waiting_chat_drops_it_and_deleting_the_answered_one_stops_it(started_service) -> None:
    async def scenario():
        async with started_service(LONG) as started:
            service, doors, recorder = started.service, started.doors, started.events
            first = await _writing_in(started, recorder, "A long one")
            doors.chat.new_conversation()
            assert doors.chat.send("B waits")
            await recorder.until(lambda: len(doors.chat.waiting_ids) == 1, what="B to wait")
            second = doors.chat.waiting_ids[0]
            doors.chat.new_conversation()
            await _short(started)
            assert doors.chat.send("C waits too")
            await recorder.until(lambda: len(doors.chat.waiting_ids) == 2, what="C to wait")
            third = doors.chat.waiting_ids[1]
            assert await doors.chat.delete_conversation(second)
            assert doors.chat.waiting_ids == (third,) and doors.chat.answering_id == first
            assert await doors.chat.delete_conversation(first)  # stopped (and saved) first, then deleted
            await doors.chat.wait_idle()
            assert recorder.of(ev.ConversationRemoved)[-2:] == [ev.ConversationRemoved(second),
                                                              ev.ConversationRemoved(first)]
            listed = await history(service, HistoryStore.list_conversations)
            assert [c.id for c in listed] == [third]
            user, answer = await stored(service, third)
            assert answer.state == MessageState.COMPLETE
            assert not [p for p in recorder.of(ev.Problem)], "nothing went wrong"

    run(scenario)
