"""EmbeddingTurns: the embedding model's one process, handed out first come first served (so indexing that
asks again at once cannot keep an API request waiting), switched with the model, ended for good on close."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from app.service.documents.embedding_turns import EmbeddingClosed, EmbeddingTurns

LIMIT_S = 10


class Recording:
    """An embedder that says which file it stands for and whether it was closed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.closed = False

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[float(len(text))] for text in texts]

    def close(self) -> None:
        self.closed = True


def test_a_caller_that_asks_again_at_once_waits_behind_one_already_waiting() -> None:
    turns = EmbeddingTurns(Recording)
    model = Path("minilm.gguf")
    order: list[str] = []
    indexing_holds, api_waits = threading.Event(), threading.Event()

    def indexing() -> None:
        with turns.turn(model):
            order.append("indexing batch 1")
            indexing_holds.set()
            assert api_waits.wait(LIMIT_S)
            while turns.in_line < 2:  # until the API request is in the line behind this batch
                api_waits.wait(0.001)
        with turns.turn(model):  # the next batch, asked for the moment the first is stored
            order.append("indexing batch 2")

    def api() -> None:
        assert indexing_holds.wait(LIMIT_S)
        api_waits.set()
        with turns.turn(model):
            order.append("api request")

    threads = [threading.Thread(target=indexing), threading.Thread(target=api)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(LIMIT_S)
    assert order == ["indexing batch 1", "api request", "indexing batch 2"]


def test_one_process_per_model_started_on_the_first_turn_and_switched_with_the_file() -> None:
    made: list[Recording] = []

    def make(path: Path) -> Recording:
        made.append(Recording(path))
        return made[-1]

    turns = EmbeddingTurns(make)
    assert made == []  # nothing starts before a turn needs it
    first = turns.embedder_for(Path("a.gguf"))
    assert first.embed(["four", "sixteen"]) == [[4.0], [7.0]]
    assert first.embed(["again"]) == [[5.0]] and len(made) == 1  # the same process, turn after turn
    with turns.turn(Path("b.gguf")) as other:
        assert isinstance(other, Recording) and other.path == Path("b.gguf")
    assert made[0].closed and not made[1].closed  # another model's turn ended the first one's process
    turns.release()
    assert made[1].closed
    first.embed(["x"])
    assert len(made) == 3  # started again after a release


def test_after_close_no_turn_starts_and_the_process_has_ended() -> None:
    made: list[Recording] = []
    turns = EmbeddingTurns(lambda path: made.append(Recording(path)) or made[-1])
    turns.embedder_for(Path("a.gguf")).embed(["x"])
    turns.close()
    assert made[0].closed
    with pytest.raises(EmbeddingClosed):
        with turns.turn(Path("a.gguf")):
            pass
    assert len(made) == 1
