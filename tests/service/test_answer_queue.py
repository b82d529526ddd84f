"""Answers across chats: a message sent while another chat is answered is saved at once and
answered in its turn, open or not; Stop, delete, regenerate and edit know which chat they mean."""

from __future__ import annotations

import dataclasses

from app.core.conversation import MessageState, Role
from app.core.history import HistoryStore
from app.service import events as ev
from tests.helpers.scripted_answers import scripted_text
from tests.service.conftest import LONG, history, run, stored, writing


async def _writing_in(controller, recorder, text: str) -> int:
    """Send in the open chat and wait until its answer streams; the chat's id."""
    assert controller.send(text)
    await recorder.until(lambda: writing(controller) and recorder.of(ev.TextGrew), what="the answer to stream")
    return controller.answering_id


async def _short(controller) -> None:
    """The open chat answers in a few tokens."""
    system, settings = controller.conversation_settings()
    await controller.set_conversation_settings(system, dataclasses.replace(settings, max_tokens=6))


def test_a_message_in_another_chat_is_saved_at_once_and_answered_after(started_controller) -> None:
    async def scenario():
        async with started_controller(LONG) as started:
            controller, recorder = started.controller, started.events
            first = await _writing_in(controller, recorder, "Chat A talks at length")
            controller.new_conversation()
            assert not controller.open_chat_busy and recorder.of(ev.BusyChanged)[-1].busy is False
            await _short(controller)
            second = controller.conversation.id
            assert controller.send("Chat B asks meanwhile")
            assert controller.open_chat_busy and recorder.of(ev.BusyChanged)[-1].busy is True
            await recorder.until(lambda: controller.waiting_ids == (second,), what="B to wait")
            assert controller.answering_id == first
            # Saved at once, not when its turn comes; shown in the open chat too.
            await recorder.until(lambda: controller.messages, what="B's message")
            assert controller.answering_id == first, "A is still being answered"
            [saved] = await stored(controller, second)
            assert (saved.role, saved.text) == (Role.USER, "Chat B asks meanwhile")
            assert [m.text for m in controller.messages] == ["Chat B asks meanwhile"]
            assert not controller.send("Twice while waiting"), "one waiting answer per chat"
            await controller.open_conversation(first)  # B's answer goes on behind the user's back
            assert recorder.of(ev.BusyChanged)[-1].busy is True, "said again for the chat opened"
            controller.stop()  # the open chat: A's answer, as written so far
            await controller.wait_idle()
            user, answer = await stored(controller, second)
            assert answer.role == Role.ASSISTANT and answer.state == MessageState.COMPLETE and answer.text
            assert answer.text == scripted_text(6), "B's answer, as its own chat's settings asked"
            a_answer = (await stored(controller, first))[-1]
            assert a_answer.stats.finish_reason == "cancelled"
            assert all(m.conversation_id == first for m in controller.messages), "B's answer is not shown in A"
            lines = [(e.answering, e.waiting) for e in recorder.of(ev.AnswerQueueChanged)]
            assert lines[-4:] == [(first, ()), (first, (second,)), (second, ()), (None, ())]
            b_activity = [e for e in recorder.of(ev.ActivityChanged) if e.conversation_id == second]
            assert b_activity and b_activity[-1].text == "Writing…"
            assert recorder.of(ev.ActivityChanged)[-1] == ev.ActivityChanged("Idle", None)
            assert recorder.of(ev.BusyChanged)[-1].busy is False

    run(scenario)


def test_stop_takes_a_waiting_chat_out_of_line_and_regenerate_answers_it_later(started_controller) -> None:
    async def scenario():
        async with started_controller(LONG) as started:
            controller, recorder = started.controller, started.events
            first = await _writing_in(controller, recorder, "A long one")
            controller.new_conversation()
            await _short(controller)
            second = controller.conversation.id
            assert controller.send("Never mind")
            await recorder.until(lambda: controller.waiting_ids == (second,) and controller.messages, what="B to wait")
            controller.stop(second)
            assert controller.waiting_ids == () and controller.answering_id == first and not controller.open_chat_busy
            assert recorder.of(ev.BusyChanged)[-1].busy is False
            [kept] = await stored(controller, second)
            assert kept.text == "Never mind", "its message stays, unanswered"
            # Regenerate answers a last message left unanswered, waiting its turn again.
            assert controller.regenerate() and controller.open_chat_busy
            await recorder.until(lambda: controller.waiting_ids == (second,), what="B to wait again")
            controller.stop(first)
            await controller.wait_idle()
            user, answer = await stored(controller, second)
            assert user.id == kept.id and answer.state == MessageState.COMPLETE
            assert [m.id for m in controller.messages] == [user.id, answer.id]

    run(scenario)


def test_regenerate_and_edit_in_another_chat_wait_their_turn(started_controller) -> None:
    async def scenario():
        async with started_controller(LONG) as started:
            controller, recorder = started.controller, started.events
            await _short(controller)
            assert controller.send("B first")
            await controller.wait_idle()
            second = controller.conversation.id
            old_user, old_answer = controller.messages
            controller.new_conversation()
            first = await _writing_in(controller, recorder, "A long one")
            await controller.open_conversation(second)
            assert controller.regenerate(), "queued, not refused"
            await recorder.until(lambda: len(controller.messages) == 1, what="the old answer to go")
            assert controller.waiting_ids == (second,) and controller.answering_id == first
            assert [m.id for m in controller.messages] == [old_user.id], "the old answer goes at once"
            assert not controller.edit_and_resend(old_user.id, "no"), "this chat already waits"
            controller.stop(first)
            await controller.wait_idle()
            user, answer = await stored(controller, second)
            assert user.id == old_user.id and answer.id != old_answer.id and answer.state == MessageState.COMPLETE
            assert controller.edit_and_resend(user.id, "B, edited")
            await controller.wait_idle()
            assert [m.text for m in controller.messages][0] == "B, edited"

    run(scenario)


def test_deleting_a_waiting_chat_drops_it_and_deleting_the_answered_one_stops_it(started_controller) -> None:
    async def scenario():
        async with started_controller(LONG) as started:
            controller, recorder = started.controller, started.events
            first = await _writing_in(controller, recorder, "A long one")
            controller.new_conversation()
            assert controller.send("B waits")
            await recorder.until(lambda: len(controller.waiting_ids) == 1, what="B to wait")
            second = controller.waiting_ids[0]
            controller.new_conversation()
            await _short(controller)
            assert controller.send("C waits too")
            await recorder.until(lambda: len(controller.waiting_ids) == 2, what="C to wait")
            third = controller.waiting_ids[1]
            assert await controller.delete_conversation(second)
            assert controller.waiting_ids == (third,) and controller.answering_id == first
            assert await controller.delete_conversation(first)  # stopped (and saved) first, then deleted
            await controller.wait_idle()
            assert recorder.of(ev.ConversationRemoved)[-2:] == [ev.ConversationRemoved(second),
                                                              ev.ConversationRemoved(first)]
            listed = await history(controller, HistoryStore.list_conversations)
            assert [c.id for c in listed] == [third]
            user, answer = await stored(controller, third)
            assert answer.state == MessageState.COMPLETE
            assert not [p for p in recorder.of(ev.Problem)], "nothing went wrong"

    run(scenario)
