"""The answer queue's order on its own: first sent, first answered, even when a later chat's
message is saved sooner; a turn dropped while it waits for its model leaves at once."""

from __future__ import annotations

import asyncio

from app.service.chats.answer_queue import AnswerQueue, Turn
from tests.service.conftest import run


def _queue(served: list[int], gate: dict[int, asyncio.Event]) -> tuple[AnswerQueue, list[tuple]]:
    changes: list[tuple] = []
    tasks: set[asyncio.Task] = set()

    async def serve(turn: Turn) -> None:
        served.append(turn.conversation_id)
        await gate.setdefault(turn.conversation_id, asyncio.Event()).wait()

    def spawn(coroutine):
        task = asyncio.get_running_loop().create_task(coroutine)
        tasks.add(task)
        return task

    queue = AnswerQueue(serve, spawn, lambda: changes.append((queue.answering_id, queue.waiting_ids)))
    return queue, changes


def test_the_first_sent_is_answered_first_even_if_saved_last() -> None:
    async def scenario():
        served: list[int] = []
        gate: dict[int, asyncio.Event] = {}
        queue, changes = _queue(served, gate)
        first, second = queue.join(1, None), queue.join(2, None)
        queue.ready(second)  # B's message was saved first
        await asyncio.sleep(0.01)
        assert served == [] and queue.answering_id == 1 and queue.waiting_ids == (2,)
        queue.ready(first)
        await asyncio.sleep(0.01)
        assert served == [1]
        gate[1].set()
        await asyncio.sleep(0.01)
        assert served == [1, 2] and queue.answering_id == 2
        gate[2].set()
        await queue.wait_idle()
        assert queue.idle and changes[-1] == (None, ())
        assert first.ended.is_set() and second.ended.is_set()

    run(scenario, timeout=10)


def test_a_turn_dropped_while_it_waits_leaves_and_the_next_goes_on() -> None:
    async def scenario():
        served: list[int] = []
        gate: dict[int, asyncio.Event] = {}
        queue, _ = _queue(served, gate)
        head, waiting, last = queue.join(1, None), queue.join(2, None), queue.join(3, None)
        for turn in (head, waiting, last):
            queue.ready(turn)
        await asyncio.sleep(0.01)
        queue.drop(waiting)  # still in line: out at once
        assert queue.waiting_ids == (3,) and waiting.ended.is_set()
        queue.drop(head)  # being served (say, its model loads): its task is cancelled
        await asyncio.sleep(0.01)
        assert served == [1, 3] and queue.answering_id == 3
        queue.drop(queue.turn_of(3))
        await queue.wait_idle()
        assert queue.turn_of(3) is None

    run(scenario, timeout=10)
