"""Each chat's unsent draft through the controller: kept while switching, across a restart,
written off the caller's thread with the latest text winning, and gone once sent."""

from __future__ import annotations

import threading

import app.service.chats.drafts
from app.core.drafts import read_drafts, write_drafts
from app.service import events as ev
from tests.service.conftest import drafted_ids, drafts_written, history, run


def test_drafts_survive_switching_and_restarting(started_controller) -> None:
    async def first_run():
        async with started_controller() as started:
            controller, recorder = started.controller, started.events
            await controller.set_conversation_settings("", controller.conversation_settings()[1])
            chat = controller.conversation.id
            controller.save_draft(chat, "half a thought")
            assert controller.draft_for(chat) == "half a thought", "read back at once, before it is written"
            controller.new_conversation()
            controller.save_draft(None, "the start of a new chat")
            await controller.open_conversation(chat)
            assert controller.draft_for(chat) == "half a thought"
            assert controller.draft_for(None) == "the start of a new chat"
            assert drafted_ids(controller) == {chat}
            drafted = [(e.conversation_id, e.has_draft) for e in recorder.of(ev.DraftChanged)]
            assert drafted == [(chat, True), (None, True)]
            await started.shutdown()  # written before the history closes
            return chat

    chat = run(first_run)

    async def second_run():
        async with started_controller(install_model=False) as started:
            controller, recorder = started.controller, started.events
            assert controller.draft_for(chat) == "half a thought"
            assert controller.draft_for(None) == "the start of a new chat"
            assert controller.draft_for(12345) == ""
            assert set(recorder.of(ev.DraftChanged)) == {ev.DraftChanged(chat, True), ev.DraftChanged(None, True)}

    run(second_run)


def test_the_latest_text_wins_and_is_written_on_the_writer_thread(started_controller, monkeypatch) -> None:
    writes: list[tuple[str, dict]] = []

    def watched(store, drafts):
        writes.append((threading.current_thread().name, dict(drafts)))
        write_drafts(store, drafts)

    monkeypatch.setattr(app.service.chats.drafts, "write_drafts", watched)

    async def scenario():
        async with started_controller() as started:
            controller = started.controller
            await controller.set_conversation_settings("", controller.conversation_settings()[1])
            chat = controller.conversation.id
            for length in range(1, 200):  # a burst of keystrokes, faster than the disk
                controller.save_draft(chat, "x" * length)
            controller.save_draft(chat, "final words")
            await drafts_written(controller)
            assert await history(controller, read_drafts) == {chat: "final words"}
            assert len(writes) < 10, "a burst is written in a few transactions, not one per keystroke"
            assert {thread for thread, _ in writes} == {"kestrel-writer_0"}
            assert writes[-1][1] == {chat: "final words"}

    run(scenario)


def test_sending_ends_the_draft_and_deleting_the_chat_forgets_it(started_controller) -> None:
    async def scenario():
        async with started_controller() as started:
            controller, recorder = started.controller, started.events
            controller.save_draft(None, "Hello there")
            assert controller.send("Hello there")
            assert controller.draft_for(None) == ""
            await controller.wait_idle()
            chat = controller.conversation.id
            controller.save_draft(chat, "a follow-up I never sent")
            assert await controller.delete_conversation(chat)
            assert controller.draft_for(chat) == "" and recorder.of(ev.DraftChanged)[-1] == ev.DraftChanged(chat, False)
            await drafts_written(controller)
            assert await history(controller, read_drafts) == {}

    run(scenario)
