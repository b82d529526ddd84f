"""StreamingAnswer: flush cadence on the writer thread, finishing, and a real killed process."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from app.core.answer_stats import AnswerStats
from app.core.conversation import MessageState, Role
from app.core.store.history import HistoryStore
from app.service.storage import Storage
from app.service.chats.streaming import StreamingAnswer
from tests.core.conftest import FakeClock

REPO_ROOT = Path(__file__).resolve().parents[2]


def _scenario(db_path: Path, body) -> None:
    async def run() -> None:
        storage = await Storage.open(db_path, None)
        try:
            await body(storage)
        finally:
            await storage.close()

    asyncio.run(run())


async def _stored(storage: Storage, stream: StreamingAnswer) -> tuple[str, MessageState]:
    message = await storage.history(HistoryStore.get_message, stream.message_id)
    return message.text, message.state


async def _conversation(storage: Storage) -> int:
    return (await storage.history(HistoryStore.create_conversation)).id


def test_start_stores_an_empty_streaming_answer(db_path: Path) -> None:
    async def body(storage: Storage) -> None:
        stream = await StreamingAnswer.start(storage, await _conversation(storage))
        message = await storage.history(HistoryStore.get_message, stream.message_id)
        assert (message.role, message.text, message.state) == (Role.ASSISTANT, "", MessageState.STREAMING)
        assert stream.text == ""

    _scenario(db_path, body)


def test_text_is_written_once_per_flush_interval(db_path: Path) -> None:
    async def body(storage: Storage) -> None:
        clock = FakeClock(100.0)
        stream = await StreamingAnswer.start(storage, await _conversation(storage), clock=clock, flush_interval=1.0)
        assert await stream.append("Hel") is False
        assert await _stored(storage, stream) == ("", MessageState.STREAMING)
        clock.advance(0.5)
        assert await stream.append("lo") is False
        clock.advance(0.5)
        assert await stream.append(",") is True  # 1.0 s since start
        assert await _stored(storage, stream) == ("Hello,", MessageState.STREAMING)
        clock.advance(0.9)
        assert await stream.append(" world") is False
        assert await _stored(storage, stream) == ("Hello,", MessageState.STREAMING)
        clock.advance(0.2)
        assert await stream.append("!") is True  # 1.1 s since the last write
        assert await _stored(storage, stream) == ("Hello, world!", MessageState.STREAMING)
        clock.advance(0.3)
        assert await stream.append(" Bye") is False
        assert stream.text == "Hello, world! Bye"
        done = await stream.finish(AnswerStats(tokens=6, tokens_per_s=20.5))
        assert (done.text, done.state, done.stats) == ("Hello, world! Bye", MessageState.COMPLETE,
                                                      AnswerStats(tokens=6, tokens_per_s=20.5))
        assert await storage.history(HistoryStore.get_message, stream.message_id) == done

    _scenario(db_path, body)


def test_flush_writes_now_only_when_text_is_unsaved(db_path: Path) -> None:
    async def body(storage: Storage) -> None:
        stream = await StreamingAnswer.start(storage, await _conversation(storage), clock=FakeClock(),
                                             flush_interval=10.0)
        assert await stream.flush() is False
        await stream.append("partial")
        assert await stream.flush() is True
        assert await _stored(storage, stream) == ("partial", MessageState.STREAMING)
        assert await stream.flush() is False

    _scenario(db_path, body)


def test_interrupt_keeps_the_text(db_path: Path) -> None:
    async def body(storage: Storage) -> None:
        stream = await StreamingAnswer.start(storage, await _conversation(storage), clock=FakeClock())
        await stream.append("Half an ")
        await stream.append("answer")
        stopped = await stream.interrupt()
        assert (stopped.text, stopped.state, stopped.stats) == ("Half an answer", MessageState.INTERRUPTED, None)
        with pytest.raises(RuntimeError, match="already finished"):
            await stream.append("more")
        with pytest.raises(RuntimeError, match="already finished"):
            await stream.finish()

    _scenario(db_path, body)


def test_an_engine_failure_is_saved_in_its_words_as_before(db_path: Path) -> None:
    async def body(storage: Storage) -> None:
        stream = await StreamingAnswer.start(storage, await _conversation(storage), clock=FakeClock())
        await stream.append("Half")
        failed = await stream.interrupt(AnswerStats(error="The engine stopped."))
        assert failed.stats == AnswerStats(error="The engine stopped.") and not failed.stats.reported
        assert await storage.history(HistoryStore.get_message, stream.message_id) == failed

    _scenario(db_path, body)
    conn = sqlite3.connect(db_path)
    try:
        # The form every Kestrel before typed stats wrote for such an answer.
        assert conn.execute("SELECT stats FROM messages WHERE role = 'assistant'").fetchall() == [
            ('{"error": "The engine stopped."}',)]
    finally:
        conn.close()


def test_recover_interrupted_marks_only_streaming_messages(db_path: Path) -> None:
    async def body(storage: Storage) -> None:
        conversation_id = await _conversation(storage)
        whole = await storage.history(HistoryStore.add_message, conversation_id, Role.ASSISTANT, "done")
        left = await StreamingAnswer.start(storage, conversation_id)
        await left.append("cut off")
        await left.flush()
        assert await storage.history(HistoryStore.recover_interrupted) == 1
        assert await _stored(storage, left) == ("cut off", MessageState.INTERRUPTED)
        assert (await storage.history(HistoryStore.get_message, whole.id)).state is MessageState.COMPLETE
        assert await storage.history(HistoryStore.recover_interrupted) == 0

    _scenario(db_path, body)


_STREAMER = """
import asyncio, sys, time
from pathlib import Path
from app.core.conversation import Role
from app.core.store.history import HistoryStore
from app.service.storage import Storage
from app.service.chats.streaming import StreamingAnswer

async def main():
    storage = await Storage.open(Path(sys.argv[1]), None)
    conversation = await storage.history(HistoryStore.create_conversation, "Crash")
    await storage.history(HistoryStore.add_message, conversation.id, Role.USER, "Tell me a long story.")
    stream = await StreamingAnswer.start(storage, conversation.id, flush_interval=0.05)
    print("started", conversation.id, flush=True)
    i = 0
    # Bounded, so a streamer that never flushes ends the test instead of hanging it.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if await stream.append(f"token{i} "):
            print("flushed", len(stream.text), flush=True)
        i += 1
        await asyncio.sleep(0.001)
    print("gave up", flush=True)

asyncio.run(main())
"""


def _streamed(length: int) -> str:
    """The first `length` characters the streamer process produces."""
    parts: list[str] = []
    total = 0
    i = 0
    while total < length:
        parts.append(f"token{i} ")
        total += len(parts[-1])
        i += 1
    return "".join(parts)[:length]


def test_killed_process_keeps_what_was_flushed(db_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _STREAMER, str(db_path)], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        first = proc.stdout.readline().split()
        assert first[:1] == ["started"], proc.stderr.read()
        conversation_id = int(first[1])
        flushed: list[int] = []
        for _ in range(4):
            line = proc.stdout.readline().split()
            assert line[:1] == ["flushed"], line
            flushed.append(int(line[1]))
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    assert proc.returncode != 0

    with HistoryStore(db_path) as store:
        question, answer = store.messages(conversation_id)
        assert (question.role, question.text) == (Role.USER, "Tell me a long story.")
        assert question.state is MessageState.COMPLETE
        assert answer.role is Role.ASSISTANT and answer.state is MessageState.STREAMING
        # Everything reported as flushed before the kill is on disk; nothing torn.
        assert len(answer.text) >= flushed[-1] > 0
        assert answer.text == _streamed(len(answer.text))
        assert store.recover_interrupted() == 1
        assert store.get_message(answer.id).state is MessageState.INTERRUPTED

    conn = sqlite3.connect(db_path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
