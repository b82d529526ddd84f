"""Each chat's unsent draft through the chat door: kept while switching, across a restart,
written off the caller's thread with the latest text winning, and gone once sent."""

from __future__ import annotations

import threading

import app.service.chats.drafts
from app.core.store.drafts import read_drafts, write_drafts
from app.service import events as ev
from tests.service.conftest import drafted_ids, drafts_written, history, run


def test_drafts_survive_switching_and_restarting(started_service) -> None:
    async def first_run():
        async with started_service() as started:
            service, doors, recorder = started.service, started.doors, started.events
            await doors.chat.set_conversation_settings("", doors.chat.conversation_settings()[1])
            chat = doors.chat.conversation.id
            doors.chat.save_draft(chat, "half a thought")
            assert doors.chat.draft_for(chat) == "half a thought", "read back at once, before it is written"
            doors.chat.new_conversation()
            doors.chat.save_draft(None, "the start of a new chat")
            await doors.chat.open_conversation(chat)
            assert doors.chat.draft_for(chat) == "half a thought"
            assert doors.chat.draft_for(None) == "the start of a new chat"
            assert drafted_ids(service) == {chat}
            drafted = [(e.conversation_id, e.has_draft) for e in recorder.of(ev.DraftChanged)]
            assert drafted == [(chat, True), (None, True)]
            await started.shutdown()  # written before the history closes
            return chat

    chat = run(first_run)

    async def second_run():
        async with started_service(install_model=False) as started:
            doors, recorder = started.doors, started.events
            assert doors.chat.draft_for(chat) == "half a thought"
            assert doors.chat.draft_for(None) == "the start of a new chat"
            assert doors.chat.draft_for(12345) == ""
            assert set(recorder.of(ev.DraftChanged)) == {ev.DraftChanged(chat, True), ev.DraftChanged(None, True)}

    run(second_run)


def test_the_latest_text_wins_and_is_written_on_the_writer_thread(started_service, monkeypatch) -> None:
    writes: list[tuple[str, dict]] = []

    def watched(store, drafts):
        writes.append((threading.current_thread().name, dict(drafts)))
        write_drafts(store, drafts)

    monkeypatch.setattr(app.service.chats.drafts, "write_drafts", watched)

    async def scenario():
        async with started_service() as started:
            service, doors = started.service, started.doors
            await doors.chat.set_conversation_settings("", doors.chat.conversation_settings()[1])
            chat = doors.chat.conversation.id
            for length in range(1, 200):  # a burst of keystrokes, faster than the disk
                doors.chat.save_draft(chat, "x" * length)
            doors.chat.save_draft(chat, "final words")
            await drafts_written(service)
            assert await history(service, read_drafts) == {chat: "final words"}
            assert len(writes) < 10, "a burst is written in a few transactions, not one per keystroke"
            assert {thread for thread, _ in writes} == {"kestrel-writer_0"}
            assert writes[-1][1] == {chat: "final words"}

    run(scenario)


def test_sending_ends_the_draft_and_deleting_the_chat_forgets_it(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            service, doors, recorder = started.service, started.doors, started.events
            doors.chat.save_draft(None, "Hello there")
            assert doors.chat.send("Hello there")
            assert doors.chat.draft_for(None) == ""
            await doors.chat.wait_idle()
            chat = doors.chat.conversation.id
            doors.chat.save_draft(chat, "a follow-up I never sent")
            assert await doors.chat.delete_conversation(chat)
            assert doors.chat.draft_for(chat) == "" and recorder.of(ev.DraftChanged)[-1] == ev.DraftChanged(chat, False)
            await drafts_written(service)
            assert await history(service, read_drafts) == {}

    run(scenario)
