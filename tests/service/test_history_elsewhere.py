"""Another Kestrel process changes the history: the service hears of it and reads it again.

The other process is real (`python -m app import`, or a HistoryStore in a child
Python) over the same KESTREL_HOME; the app's own writes must not be reported.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from app.core.paths import data_paths
from app.service import events as ev
from app.service.chats.chat_files import ExportOutcome
from tests.service.conftest import run

ROOT = Path(__file__).resolve().parents[2]


async def other_process(*args: str) -> subprocess.CompletedProcess[str]:
    """A second Kestrel process over this test's home (its environment), run off the loop."""
    done = await asyncio.to_thread(subprocess.run, [sys.executable, *args], cwd=ROOT, capture_output=True,
                                   text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done


def test_an_import_by_another_process_is_heard_and_the_list_read_again(started_service, tmp_path) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            doors, events = started.doors, started.events
            assert doors.chat.send("Hello there")
            await doors.chat.wait_idle()
            first = doors.chat.conversation
            assert first is not None
            exported = tmp_path / "chat.json"
            assert await doors.files.export_conversation(first.id, exported, "json") is ExportOutcome.WRITTEN
            await asyncio.sleep(1.0)  # several looks of the watch, after the app's own writes
            assert not events.of(ev.HistoryChangedElsewhere), "the app's own writes were reported"

            await other_process("-m", "app", "import", str(exported))
            await events.until(lambda: events.of(ev.HistoryChangedElsewhere), timeout=10, what="the change heard")
            listed_before, opened_before = len(events.of(ev.ConversationsListed)), len(events.of(ev.ConversationOpened))
            await doors.history.follow_history()
            assert len(events.of(ev.ConversationOpened)) == opened_before, "the open chat, unchanged, was not redrawn"
            listed = events.of(ev.ConversationsListed)
            assert len(listed) == listed_before + 1
            assert len(listed[-1].conversations) == 2
            assert doors.chat.conversation is not None and doors.chat.conversation.id == first.id  # still the open chat

    run(scenario)


def test_the_open_chat_changed_elsewhere_is_shown_again_and_one_deleted_gives_way(started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            doors, events = started.doors, started.events
            assert doors.chat.send("Hello there")
            await doors.chat.wait_idle()
            chat = doors.chat.conversation
            assert chat is not None
            db = data_paths().history_db
            rename = ("from app.core.store.history import HistoryStore; import sys; "
                      "HistoryStore(sys.argv[1]).rename_conversation(int(sys.argv[2]), 'Renamed elsewhere')")
            await other_process("-c", rename, str(db), str(chat.id))
            await events.until(lambda: events.of(ev.HistoryChangedElsewhere), timeout=10, what="the rename heard")
            await doors.history.follow_history()
            assert doors.chat.conversation is not None and doors.chat.conversation.title == "Renamed elsewhere"
            assert events.of(ev.ConversationOpened)[-1].conversation == doors.chat.conversation

            heard = len(events.of(ev.HistoryChangedElsewhere))
            delete = ("from app.core.store.history import HistoryStore; import sys; "
                      "HistoryStore(sys.argv[1]).delete_conversation(int(sys.argv[2]))")
            await other_process("-c", delete, str(db), str(chat.id))
            await events.until(lambda: len(events.of(ev.HistoryChangedElsewhere)) > heard, timeout=10,
                               what="the delete heard")
            await doors.history.follow_history()
            assert doors.chat.conversation is None  # a new chat took its place
            assert events.of(ev.ConversationsListed)[-1].conversations == ()

    run(scenario)


def test_the_watch_stops_at_shutdown(started_service) -> None:
    async def scenario() -> None:
        async with started_service() as started:
            storage = started.service.storage
            assert storage is not None and storage._watch is not None and storage._watch.running
            await started.shutdown()
            assert not storage._watch.running

    run(scenario)
