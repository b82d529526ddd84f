"""Tests for StreamingMessage: flush cadence, finishing, and a real killed process."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from app.core.conversation import MessageState, Role
from app.core.history import HistoryStore
from app.core.streaming import StreamingMessage
from tests.core.conftest import FakeClock

REPO_ROOT = Path(__file__).resolve().parents[2]


def _stored(store: HistoryStore, stream: StreamingMessage) -> tuple[str, MessageState]:
    message = store.get_message(stream.message_id)
    return message.text, message.state


def test_start_stores_an_empty_streaming_answer(store: HistoryStore) -> None:
    conversation = store.create_conversation()
    stream = StreamingMessage.start(store, conversation.id)
    message = store.get_message(stream.message_id)
    assert (message.role, message.text, message.state) == (
        Role.ASSISTANT,
        "",
        MessageState.STREAMING,
    )
    assert stream.text == ""


def test_text_is_written_once_per_flush_interval(store: HistoryStore) -> None:
    conversation = store.create_conversation()
    clock = FakeClock(100.0)
    stream = StreamingMessage.start(store, conversation.id, clock=clock, flush_interval=1.0)

    assert stream.append("Hel") is False
    assert _stored(store, stream) == ("", MessageState.STREAMING)
    clock.advance(0.5)
    assert stream.append("lo") is False
    assert _stored(store, stream) == ("", MessageState.STREAMING)
    clock.advance(0.5)
    assert stream.append(",") is True  # 1.0 s since start
    assert _stored(store, stream) == ("Hello,", MessageState.STREAMING)
    clock.advance(0.9)
    assert stream.append(" world") is False
    assert _stored(store, stream) == ("Hello,", MessageState.STREAMING)
    clock.advance(0.2)
    assert stream.append("!") is True  # 1.1 s since the last write
    assert _stored(store, stream) == ("Hello, world!", MessageState.STREAMING)
    clock.advance(0.3)
    assert stream.append(" Bye") is False
    assert stream.text == "Hello, world! Bye"
    assert _stored(store, stream) == ("Hello, world!", MessageState.STREAMING)

    done = stream.finish({"tokens": 6, "tokens_per_second": 20.5})
    assert (done.text, done.state, done.stats) == (
        "Hello, world! Bye",
        MessageState.COMPLETE,
        {"tokens": 6, "tokens_per_second": 20.5},
    )
    assert store.get_message(stream.message_id) == done


def test_flush_writes_now_only_when_text_is_unsaved(store: HistoryStore) -> None:
    conversation = store.create_conversation()
    clock = FakeClock()
    stream = StreamingMessage.start(store, conversation.id, clock=clock, flush_interval=10.0)
    assert stream.flush() is False
    stream.append("partial")
    assert stream.flush() is True
    assert _stored(store, stream) == ("partial", MessageState.STREAMING)
    assert stream.flush() is False


def test_interrupt_keeps_the_text(store: HistoryStore) -> None:
    conversation = store.create_conversation()
    clock = FakeClock()
    stream = StreamingMessage.start(store, conversation.id, clock=clock, flush_interval=1.0)
    stream.append("Half an ")
    stream.append("answer")
    stopped = stream.interrupt()
    assert (stopped.text, stopped.state, stopped.stats) == (
        "Half an answer",
        MessageState.INTERRUPTED,
        None,
    )
    with pytest.raises(RuntimeError, match="already finished"):
        stream.append("more")
    with pytest.raises(RuntimeError, match="already finished"):
        stream.finish()


def test_recover_interrupted_marks_only_streaming_messages(store: HistoryStore) -> None:
    conversation = store.create_conversation()
    whole = store.add_message(conversation.id, Role.ASSISTANT, "done")
    left = StreamingMessage.start(store, conversation.id)
    left.append("cut off")
    left.flush()
    assert store.recover_interrupted() == 1
    assert _stored(store, left) == ("cut off", MessageState.INTERRUPTED)
    assert store.get_message(whole.id).state is MessageState.COMPLETE
    assert store.recover_interrupted() == 0


_STREAMER = """
import sys, time
from pathlib import Path
from app.core.conversation import Role
from app.core.history import HistoryStore
from app.core.streaming import StreamingMessage

store = HistoryStore(Path(sys.argv[1]))
conversation = store.create_conversation("Crash")
store.add_message(conversation.id, Role.USER, "Tell me a long story.")
stream = StreamingMessage.start(store, conversation.id, flush_interval=0.05)
print("started", conversation.id, flush=True)
i = 0
# Bounded, so a streamer that never flushes ends the test instead of hanging it.
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    if stream.append(f"token{i} "):
        print("flushed", len(stream.text), flush=True)
    i += 1
    time.sleep(0.001)
print("gave up", flush=True)
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
    proc = subprocess.Popen(
        [sys.executable, "-c", _STREAMER, str(db_path)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
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
        assert answer.role is Role.ASSISTANT
        assert answer.state is MessageState.STREAMING
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
