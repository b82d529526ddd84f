"""Memories chosen by meaning with the real all-MiniLM-L6-v2 (the documents' embedding model): a memory that shares
no word with the question is found where BM25 misses it, the vectors are made in the background through the
composition root and leave with a forgotten memory, and without a model (or with a broken one) BM25 chooses."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from app.core.conversation import Role
from app.core.memories import MemoryOrigin
from app.core.memory_settings import MemorySettings
from app.core.paths import data_paths
from app.core.settings import Settings
from app.core.store.history import HistoryStore
from app.core.store.history_file import HistoryFile
from app.core.store.memories import add_memory, keep_memory_vectors, list_memories
from app.documents.embedding import EmbeddingProcess
from app.engine.protocol import ChatMessage
from app.library.importer import import_model_file
from app.library.models import ModelLibrary
from app.service.chats.memory import memory_book
from app.service.chats.memory.memory_book import MemoryBook
from app.service.chats.memory.memory_choice import choose_on_store, memory_budget
from app.service.chats.memory.memory_vectors import MemoryQuery, MemoryVectors, vector_bytes
from app.service.storage import Storage
from tests.documents.test_embedding_model import minilm
from tests.helpers.memory_facts import made_facts
from tests.service.conftest import history, run, stored

__all__ = ["minilm"]  # a fixture: (the GGUF scripts/make_embedding_gguf.py writes, the model's own files)

ADA = "My daughter is called Ada."
# No word in common with ADA (BM25 cannot find it), and all-MiniLM-L6-v2 puts ADA first among the facts
# below for it (cosine); "What is my child's name?" shares "is" with it, so BM25 finds that one too.
QUESTION = "Remind me of our kid's first name."
FACTS = made_facts(300, seed=43)  # ADA is the oldest: the newest memories do not bring it either
BUDGET = memory_budget(2048)


@pytest.fixture(scope="module")
def embedder(minilm: tuple[Path, Path]) -> Iterator[EmbeddingProcess]:
    with EmbeddingProcess(minilm[0]) as process:
        yield process


@pytest.fixture(scope="module")
def with_vectors(tmp_path_factory: pytest.TempPathFactory, embedder: EmbeddingProcess) -> Iterator[HistoryStore]:
    """ADA and the 300 facts, each with its vector of the real model."""
    store = HistoryStore(tmp_path_factory.mktemp("memories") / "history.sqlite3")
    with store.transaction():
        for text in [ADA, *FACTS]:
            add_memory(store, text, MemoryOrigin.CLI)
    memories = list_memories(store)
    vectors = embedder.embed([memory.text for memory in memories])
    keep_memory_vectors(store, embedder.model_id, [(m.id, m.text, vector_bytes(v)) for m, v in zip(memories, vectors)])
    yield store
    store.close()


def _question(embedder: EmbeddingProcess, text: str) -> MemoryQuery:
    return MemoryQuery(embedder.model_id, np.asarray(embedder.embed([text])[0], dtype=np.float32))


def _texts(store: HistoryFile, ids: Sequence[int]) -> list[str]:
    by_id = {memory.id: memory.text for memory in list_memories(store)}
    return [by_id[memory_id] for memory_id in ids]


@pytest.mark.embedding_model
def test_a_memory_that_shares_no_word_with_the_question_is_found_by_meaning(with_vectors, embedder) -> None:
    keyword = choose_on_store(with_vectors, QUESTION, BUDGET)
    assert keyword.ranked and ADA not in _texts(with_vectors, keyword.ids), "BM25 alone misses it"
    hybrid = choose_on_store(with_vectors, QUESTION, BUDGET, _question(embedder, QUESTION), MemoryVectors())
    assert hybrid.ranked and ADA in _texts(with_vectors, hybrid.ids)
    assert list(hybrid.ids) == sorted(hybrid.ids), "listed oldest first"


@pytest.mark.embedding_model
def test_vectors_of_another_model_are_not_compared(with_vectors, embedder) -> None:
    query = _question(embedder, QUESTION)
    other = MemoryQuery("another-model:0123456789ab", query.vector)
    assert choose_on_store(with_vectors, QUESTION, BUDGET, other, MemoryVectors()) == \
        choose_on_store(with_vectors, QUESTION, BUDGET)


@pytest.mark.embedding_model
def test_the_composition_root_makes_the_vectors_in_the_background_and_forgets_them(started_service,
                                                                                  minilm) -> None:
    # The real model installed in the home's library is the documents' model (none chosen: the oldest),
    # so the memory book reaches it through DocumentsService.embed_for_memory, as in the window.
    import_model_file(ModelLibrary(data_paths().ensure().models), minilm[0])

    def add_all(store: HistoryStore) -> int:
        with store.transaction():
            return [add_memory(store, text, MemoryOrigin.CLI).memory.id for text in [ADA, *FACTS]][0]

    def vectors(store: HistoryStore) -> list[int]:
        with store.transaction() as conn:
            return [int(row[0]) for row in conn.execute("SELECT memory_id FROM memory_vectors")]

    async def answer_memories(started) -> list[str]:
        doors = started.doors
        doors.chat.new_conversation()
        assert doors.chat.send(QUESTION)
        await doors.chat.wait_idle()
        answer = (await stored(started.service, doors.chat.conversation.id))[-1]
        return [memory.text for memory in await doors.memory.used_by(answer)]

    async def scenario() -> None:
        async with started_service() as started:
            service = started.service
            assert service.collections.embedding_model() is not None
            ada = await history(service, add_all)
            assert ADA not in await answer_memories(started), "no vectors yet: BM25 alone"
            # That answer's choice started the background run: every memory gets its vector.
            deadline = asyncio.get_running_loop().time() + 180
            while len(await history(service, vectors)) < len(FACTS) + 1:
                assert asyncio.get_running_loop().time() < deadline, "the vectors were not made"
                await asyncio.sleep(0.2)
            assert ADA in await answer_memories(started), "found by meaning"
            assert await started.doors.memory.remove(ada)
            assert ada not in await history(service, vectors), "forgotten with its memory"

    run(scenario, timeout=300)


def _book(storage: Storage, embed) -> MemoryBook:
    settings = Settings(memory=MemorySettings(api_uses_memory=True))

    async def nothing() -> None:
        return None

    return MemoryBook(lambda: storage, lambda: storage, lambda _event: None, lambda: settings, nothing,
                      asyncio.get_running_loop().create_task, embed=embed)


def _section(messages: Sequence[ChatMessage]) -> str:
    return next(message.content for message in messages if message.role == Role.SYSTEM)


@pytest.mark.embedding_model
def test_without_a_model_or_with_one_that_hangs_or_fails_bm25_chooses(with_vectors, embedder, monkeypatch) -> None:
    monkeypatch.setattr(memory_book, "QUESTION_WAIT_S", 0.2)
    expected = choose_on_store(with_vectors, QUESTION, memory_budget(4096))

    async def hangs(texts: Sequence[str]):
        await asyncio.Event().wait()

    async def fails(texts: Sequence[str]):
        raise RuntimeError("the embedding process is gone")

    async def works(texts: Sequence[str]):
        return embedder.model_id, np.asarray(await asyncio.to_thread(embedder.embed, list(texts)), dtype=np.float32)

    async def scenario() -> None:
        storage = await Storage.open(with_vectors.path, None)
        try:
            asked = (ChatMessage(Role.USER, QUESTION),)
            for embed in (None, hangs, fails):
                section = _section(await _book(storage, embed).for_api(asked, 4096))
                assert section.count("\n- ") == len(expected.memories) and ADA not in section, embed
            assert ADA in _section(await _book(storage, works).for_api(asked, 4096))
        finally:
            await storage.close()

    asyncio.run(scenario())


def test_the_documents_service_gives_no_vectors_without_a_model_before_its_start_or_after_its_close(
        tmp_path: Path) -> None:
    from app.service.documents.documents_service import DocumentsService
    from tests.documents.index_fakes import read_here

    async def scenario() -> None:
        service = DocumentsService(lambda _event: None, database=tmp_path / "documents.sqlite3", read=read_here)
        assert await service.embed_for_memory([QUESTION]) is None, "not started (the CLI, kestrel serve)"
        await service.start()
        try:
            assert await service.embed_for_memory([QUESTION]) is None and await service.embed_for_memory([]) is None
        finally:
            await service.close()
        assert await service.embed_for_memory([QUESTION]) is None

    asyncio.run(scenario())
