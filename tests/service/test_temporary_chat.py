"""A temporary chat through the window's chat door: answered like any chat, given no memory, no saved state
asked of the engine, and gone without a trace once left (not listed, no row, message or draft in the history
file)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from app.core.conversation import Role
from app.core.memories import MemoryOrigin
from app.core.paths import data_paths
from app.engine import protocol as p
from app.service import events as ev
from app.service.chats.temporary import TEMPORARY_TITLE, is_temporary
from tests.service.conftest import run

QUESTION = "A secret question about my temporary plans"


def _file_rows(path: Path) -> dict[str, int]:
    """What the history file holds of the temporary chat, read with SQLite itself once Kestrel closed it."""
    with sqlite3.connect(path) as conn:
        return {
            "chats": conn.execute("SELECT count(*) FROM conversations WHERE title = ? OR id > 1000000000",
                                  (TEMPORARY_TITLE,)).fetchone()[0],
            "messages": conn.execute("SELECT count(*) FROM messages WHERE text LIKE '%temporary plans%'"
                                     " OR conversation_id > 1000000000").fetchone()[0],
            "drafts": conn.execute("SELECT count(*) FROM drafts").fetchone()[0],
            "all chats": conn.execute("SELECT count(*) FROM conversations").fetchone()[0],
        }


def test_a_temporary_chat_is_answered_without_memory_and_leaves_no_trace_in_the_history_file(started_service) -> None:
    async def scenario() -> Path:
        async with started_service() as started:
            doors, service = started.doors, started.service
            await doors.memory.add("My daughter is called Ada.", MemoryOrigin.HAND)
            doors.chat.new_conversation()
            assert doors.chat.send("A saved chat's question")
            await doors.chat.wait_idle()
            saved_id = doors.chat.conversation.id

            conversation = await doors.chat.new_temporary_conversation()
            assert is_temporary(conversation.id) and doors.chat.temporary
            assert not conversation.memory, "a temporary chat uses no memory"
            assert doors.chat.conversation.id == conversation.id
            assert started.events.of(ev.ConversationOpened)[-1].conversation.id == conversation.id
            doors.chat.save_draft(conversation.id, "half a thought")  # the window saves drafts on switching
            assert doors.chat.send(QUESTION)
            await doors.chat.wait_idle()

            answer = doors.chat.messages[-1]
            assert [m.role for m in doors.chat.messages] == [Role.USER, Role.ASSISTANT]
            assert answer.text and answer.memories == (), "the answer was given no memories"
            saved_answer, generated = [r for r in started.engine.requests if isinstance(r, p.Generate)][-2:]
            assert all("Ada" not in m.content for m in generated.messages), generated.messages
            assert saved_answer.keep_state and not generated.keep_state, "the engine keeps no state of it"
            assert [m.content for m in generated.messages if m.role == Role.USER] == [QUESTION]
            assert started.events.of(ev.AnswerFinished)[-1].message.conversation_id == conversation.id
            assert conversation.id not in {c.id for c in await service.conversations.listing()}
            assert conversation.id not in doors.history.drafted_ids

            doors.chat.new_conversation()  # leaving it discards it
            await started.events.until(lambda: started.events.of(ev.ConversationRemoved), what="the chat discarded")
            assert started.events.of(ev.ConversationRemoved)[-1].conversation_id == conversation.id
            assert not doors.chat.temporary
            listed = await service.conversations.listing()
            assert [c.id for c in listed] == [saved_id]
            assert await doors.history.search("temporary plans") == set()
            return data_paths().history_db

    history_db = run(scenario)
    assert _file_rows(history_db) == {"chats": 0, "messages": 0, "drafts": 0, "all chats": 1}
    assert b"temporary plans" not in b"".join(path.read_bytes() for path in history_db.parent.glob(
        history_db.name + "*")), "not in the file, nor in its log"


def test_showing_another_chat_or_a_second_temporary_one_discards_the_first(started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            doors = started.doors
            first = await doors.chat.new_temporary_conversation()
            assert doors.chat.send("First temporary question")
            await doors.chat.wait_idle()
            second = await doors.chat.new_temporary_conversation()
            await started.events.until(lambda: started.events.of(ev.ConversationRemoved), what="the first discarded")
            assert [e.conversation_id for e in started.events.of(ev.ConversationRemoved)] == [first.id]
            assert doors.chat.conversation.id == second.id and doors.chat.messages == []
            assert second.id > first.id, "ids are never reused: a late event of the first cannot reach the second"
            doors.chat.new_conversation()
            await started.events.until(lambda: len(started.events.of(ev.ConversationRemoved)) == 2,
                                       what="the second discarded")
            assert await started.service.conversations.listing() == []

    run(scenario)


def test_another_kestrel_changing_the_history_leaves_the_temporary_chat_open(started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            doors = started.doors
            conversation = await doors.chat.new_temporary_conversation()
            await started.service.elsewhere.follow()  # what HistoryChangedElsewhere makes the window ask
            assert doors.chat.conversation is not None and doors.chat.conversation.id == conversation.id
            assert started.events.of(ev.ConversationRemoved) == []

    run(scenario)
