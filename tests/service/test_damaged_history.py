"""A damaged history at start-up or in use: said in words, file kept, model loaded, user chooses."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.core.conversation import MessageState, Role
from app.core.store.history import HistoryStore
from app.core.paths import data_paths
from app.service import events as ev
from tests.core.damaged_history import (CONVERSATIONS, MESSAGES_EACH, damage_in_use, damaged_history, digest,
                                        write_history)
from tests.service.conftest import history_in_memory, run


def _history_path():
    return data_paths().ensure().history_db


def _no_traceback(capfd) -> None:
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err


@pytest.mark.parametrize("page", [2, 5])
def test_a_damaged_page_at_start_is_said_the_model_loads_and_recovery_keeps_the_file(
        started_service, page, capfd) -> None:
    path = damaged_history(_history_path(), page)
    before = digest(path)

    async def scenario():
        async with started_service() as started:
            service, doors, recorder = started.service, started.doors, started.events
            assert doors.model.model_state == ev.ModelState.READY, doors.model.model_detail
            [found] = recorder.of(ev.DamagedHistoryFound)
            assert found.in_memory and found.path == path and str(path) in found.text
            assert "has not changed it" in found.text and "kept in memory only" in found.text
            assert digest(path) == before
            # Chat works meanwhile, in memory.
            assert doors.chat.send("Hello while the history is damaged")
            await doors.chat.wait_idle()
            assert [m.state for m in doors.chat.messages] == [MessageState.COMPLETE, MessageState.COMPLETE]
            written = doors.chat.conversation.id
            assert await doors.history.recover_history()
            [done] = recorder.of(ev.DamagedHistoryReplaced)
            assert (done.conversations, done.messages) == (CONVERSATIONS, CONVERSATIONS * MESSAGES_EACH)
            assert done.aside is not None and digest(done.aside) == before and str(done.aside) in done.text
            assert f"Recovered {CONVERSATIONS} chat(s) and {CONVERSATIONS * MESSAGES_EACH} message(s)" in done.text
            assert service.history_damage is None and not history_in_memory(service)
            # Every readable chat plus the one written meanwhile, which stays open.
            assert len(recorder.of(ev.ConversationsListed)[-1].conversations) == CONVERSATIONS + 1
            assert doors.chat.conversation.id != written or page == 5
            assert [m.text for m in doors.chat.messages][0] == "Hello while the history is damaged"
            # And the history is a file again: a new message is kept.
            assert doors.chat.send("And after")
            await doors.chat.wait_idle()

    run(scenario)
    with HistoryStore(path) as store:
        assert len(store.list_conversations()) == CONVERSATIONS + 1
        assert store.list_conversations()[0].title == "Hello while the history is damaged"
    _no_traceback(capfd)


def test_a_file_that_is_not_a_database_can_be_replaced_by_a_fresh_history(started_service, capfd) -> None:
    path = _history_path()
    notes = b"These are my notes, not a database.\n" * 200
    path.write_bytes(notes)

    async def scenario():
        async with started_service() as started:
            doors, recorder = started.doors, started.events
            assert doors.model.model_state == ev.ModelState.READY
            [found] = recorder.of(ev.DamagedHistoryFound)
            assert "not a database" in found.text
            assert await doors.history.start_fresh_history()
            [done] = recorder.of(ev.DamagedHistoryReplaced)
            assert done.aside is not None and done.aside.read_bytes() == notes
            assert done.text.startswith("Started a fresh chat history.")
            assert recorder.of(ev.ConversationsListed)[-1].conversations == ()
            assert not await doors.history.start_fresh_history()  # nothing left to replace

    run(scenario)
    with HistoryStore(path) as store:
        assert store.list_conversations() == []
    _no_traceback(capfd)


def test_an_empty_file_starts_as_an_empty_history(started_service, capfd) -> None:
    path = _history_path()
    path.write_bytes(b"")

    async def scenario():
        async with started_service() as started:
            service, doors, recorder = started.service, started.doors, started.events
            assert doors.model.model_state == ev.ModelState.READY
            assert recorder.of(ev.DamagedHistoryFound) == [] and recorder.of(ev.Problem) == []
            assert not history_in_memory(service)

    run(scenario)
    _no_traceback(capfd)


def test_damage_found_in_use_is_said_once_and_a_fresh_history_replaces_the_file(started_service, capfd) -> None:
    path = _history_path()
    write_history(path)

    async def scenario():
        async with started_service() as started:
            doors, recorder = started.doors, started.events
            assert recorder.of(ev.DamagedHistoryFound) == []
            damage_in_use(path, 4)  # the messages table's root
            await doors.chat.open_conversation(3)
            await doors.chat.open_conversation(4)
            [found] = recorder.of(ev.DamagedHistoryFound)
            assert not found.in_memory and "some chats may not open" in found.text
            assert any("damaged" in p.text for p in recorder.of(ev.Problem))
            assert await doors.history.start_fresh_history()
            [done] = recorder.of(ev.DamagedHistoryReplaced)
            assert done.aside is not None and done.aside.exists()
            assert doors.chat.send("A new start")
            await doors.chat.wait_idle()
            assert doors.chat.messages[0].role == Role.USER

    run(scenario)
    _no_traceback(capfd)


def test_the_chat_command_keeps_its_history_in_memory_so_a_damaged_file_does_not_matter(tiny_model) -> None:
    path = damaged_history(_history_path(), 2)
    before = digest(path)
    result = subprocess.run([sys.executable, "-m", "app", "chat", "--model", str(tiny_model), "--max-tokens", "4",
                             "--temperature", "0", "Hello"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "history" not in result.stderr
    assert digest(path) == before
