"""DocumentsService with what it is given: the embedding model chosen (shared with the CLI), and the
composition root that starts it, holds it while an answer streams and closes it."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from app.documents.collections import DocumentsError
from app.service import events as ev
from app.service.documents_events import ANSWERING_WORDS
from tests.service.test_documents_service import folder_of, running


def test_the_chosen_embedding_models_vectors_are_filled_in_the_background_and_searched(tmp_path: Path) -> None:
    from app.core.settings import Settings
    from app.library.importer import import_model_file
    from app.library.models import ModelLibrary
    from tests.documents.index_fakes import WordHashEmbedder
    from tests.helpers.embedding_gguf import build_embedding_gguf

    library = ModelLibrary(tmp_path / "models")
    first = import_model_file(library, build_embedding_gguf(tmp_path / "first-embed.gguf", name="first"))
    second = import_model_file(library, build_embedding_gguf(tmp_path / "second-embed.gguf", name="second", seed=1))
    saved: list[Settings] = []
    settings = [Settings()]

    async def save(new: Settings) -> None:
        saved.append(new)
        settings[0] = new

    folder = folder_of(tmp_path, 5)
    started: list[Path] = []

    def embedder(path: Path) -> WordHashEmbedder:
        started.append(path)
        return WordHashEmbedder()

    async def scenario() -> None:
        async with running(tmp_path, library=library, settings=lambda: settings[0], save_settings=save,
                           embedder=embedder) as (service, heard):
            assert service.embedding_model() == first.id  # none chosen: the oldest installed, as the CLI says
            await service.add_folder(folder)
            await heard.until(lambda: (i := heard.info("notes")) is not None and i.vectors == i.chunks == 5
                              and i.state is ev.IndexState.IDLE, "vectors made")
            assert any(p.state is ev.IndexState.EMBEDDING and p.done == p.total == 5
                       for p in heard.of(ev.IndexingProgress))
            # Hybrid: the vector side finds the note that shares words with the question.
            assert [h.path.name for h in await service.search("ferry leaves 3", ["notes"], 1)] == ["note003.txt"]
            await service.choose_embedding_model(second.id)
            assert service.embedding_model() == second.id and saved[-1].embedding_model == second.id
            await heard.until(lambda: (i := heard.info("notes")) is not None and i.vectors == 5
                              and i.state is ev.IndexState.IDLE and len(started) == 2, "the new model's vectors")
            with pytest.raises(DocumentsError, match="No installed model"):
                await service.choose_embedding_model("nothing-like-it")

    asyncio.run(scenario())


def test_an_embedding_model_installed_later_is_used_without_being_chosen(tmp_path: Path) -> None:
    # Installed anywhere (the model manager, `kestrel models add`): the library's listing is heard,
    # and with nothing chosen the new model makes vectors at once; removed, it is no longer used.
    from app.library.importer import import_model_file
    from app.library.models import ModelLibrary
    from tests.documents.index_fakes import WordHashEmbedder
    from tests.helpers.embedding_gguf import build_embedding_gguf

    library = ModelLibrary(tmp_path / "models")
    folder = folder_of(tmp_path, 3)

    async def scenario() -> None:
        async with running(tmp_path, library=library, embedder=lambda path: WordHashEmbedder()) as (service, heard):
            assert service.embedding_model() is None
            await service.add_folder(folder)
            await heard.until(lambda: (i := heard.info("notes")) is not None and i.state is ev.IndexState.IDLE
                              and i.chunks == 3, "read, keyword only")
            installed = import_model_file(library, build_embedding_gguf(tmp_path / "late-embed.gguf", name="late"))
            service.hear(ev.LibraryListed((), 0))
            await heard.until(lambda: service.embedding_model() == installed.id, "the new model taken up")
            await heard.until(lambda: (i := heard.info("notes")) is not None and i.vectors == 3, "its vectors made")
            library.remove(installed)
            service.hear(ev.LibraryListed((), 0))
            await heard.until(lambda: service.embedding_model() is None, "the removed model let go")

    asyncio.run(scenario())


def test_the_root_starts_the_service_holds_it_while_answering_and_closes_it(started_service: Any,
                                                                                   tmp_path: Path) -> None:
    from app.documents.index import default_database

    folder = folder_of(tmp_path, 2)

    async def scenario() -> None:
        async with started_service() as started:
            service, doors, recorder = started.service, started.doors, started.events
            await service.collections.add_folder(folder)
            await recorder.until(lambda: (c := service.collections.collections()) and
                                 c[0].state is ev.IndexState.IDLE and c[0].indexed == 2, what="indexed")
            assert default_database().is_file()  # the one `kestrel docs` uses
            assert doors.chat.send("Hello")
            await recorder.until(lambda: recorder.of(ev.AnswerStarted), what="the answer")
            assert service.collections.waiting_because() == ANSWERING_WORDS
            await doors.chat.wait_idle()
            assert service.collections.waiting_because() == ""
            await started.shutdown()
            assert not any(t.name == "kestrel-documents" for t in threading.enumerate())

    asyncio.run(scenario())
