"""/v1/embeddings through the official openai client, over real sockets on 127.0.0.1: the vectors of the
real all-MiniLM-L6-v2 GGUF (the documents' embedding model and process) against sentence-transformers'
published similarities, its refusals, its bounds, and a request answered while indexing fills vectors."""

from __future__ import annotations

import base64
import multiprocessing
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx2 as httpx
import numpy as np
import openai
import pytest

from app.core.paths import data_paths
from app.core.server_settings import ServerSettings
from app.core.settings import Settings
from app.documents.embedding import EmbeddingProcess
from app.documents.search import Embedder
from app.library.importer import import_model_file
from app.library.installed import InstalledModel
from app.library.models import ModelLibrary
from app.service import events as ev
from app.service.api.api_embeddings import MAX_CHARACTERS, MAX_INPUTS, ApiEmbeddings
from app.service.documents.documents_service import DocumentsService
from app.service.documents.documents_worker import EMBED_BATCH
from tests.documents.index_fakes import read_here
from tests.documents.test_embedding_model import PUBLISHED, SENTENCES, _reference_tokenizer
from tests.helpers.embedding_gguf import build_embedding_gguf
from tests.server.helpers import (KEY, FakeAnswers, LoopThread, loop_thread, openai_client, real_service, serving,
                                  until, words)
from tests.server.serve_process import ROOT, interrupt, read_ready, serve_command, serve_env
from tests.server.test_serve_cli import free_port
from tests.service.conftest import install

AUTH = {"Authorization": f"Bearer {KEY}"}
# Far past all-MiniLM-L6-v2's 512 tokens: each word is at least one.
TOO_LONG = " ".join(["kestrel"] * 700)


def similarities(vectors: list[list[float]]) -> np.ndarray:
    matrix = np.array(vectors, dtype=np.float64)
    return matrix @ matrix.T


def assert_published(vectors: list[list[float]]) -> None:
    """The first three SENTENCES' cosines as sentence-transformers prints them for this model, within
    0.002 (tests/documents/test_embedding_model.py measured llama.cpp's f16 GGUF 0.0001 off)."""
    assert [len(v) for v in vectors] == [384] * len(vectors)
    found = similarities(vectors)
    assert np.allclose(np.diag(found), 1.0, atol=1e-5)  # unit length, as OpenAI's are
    for (a, b), published in PUBLISHED.items():
        assert found[a, b] == pytest.approx(published, abs=2e-3), (a, b)


@contextmanager
def documents_only(thread: LoopThread, home: Path, models: Sequence[Path] = (), *, started: bool = False,
                   embedder: Callable[[Path], Embedder] | None = None
                   ) -> Iterator[tuple[DocumentsService, ModelLibrary, list[InstalledModel], list[ev.Event]]]:
    """A documents service over its own library of these models (reading files in this process, with
    the real embedding process unless `embedder` makes another), started as the window starts it or
    not, as `kestrel serve` leaves it; closed at the end."""
    library = ModelLibrary(home / "models")
    installed = [import_model_file(library, model) for model in models]
    heard: list[ev.Event] = []
    service = DocumentsService(heard.append, library=library, settings=Settings, database=home / "documents.sqlite3",
                               read=read_here, embedder=embedder)
    if started:
        thread.call(service.start())
    try:
        yield service, library, installed, heard
    finally:
        thread.call(service.close())


def embedding_children() -> list[multiprocessing.process.BaseProcess]:
    return [child for child in multiprocessing.active_children() if child.name == "kestrel-embedding"]


@pytest.mark.embedding_model
def test_the_openai_client_gets_the_documents_models_vectors_with_its_published_similarities(
        minilm: tuple[Path, Path], tiny_model: Path) -> None:
    embedding = import_model_file(ModelLibrary(data_paths().ensure().models), minilm[0])
    with loop_thread() as thread, real_service(thread, tiny_model) as service:
        assert service.collections.embedding_model() == embedding.id  # the documents' model
        answers = service.api  # as the composition root wires it
        with serving(thread, answers) as server:
            client = openai_client(server.address)
            # The client asks for base64 unless told: little-endian float32, decoded by the client.
            got = client.embeddings.create(model="text-embedding-3-small", input=SENTENCES[:3])
            assert got.model == embedding.id and got.object == "list"
            assert [item.index for item in got.data] == [0, 1, 2]
            assert_published([item.embedding for item in got.data])
            counted = sum(len(_reference_tokenizer(minilm[1]).encode(text).ids) for text in SENTENCES[:3])
            assert got.usage.prompt_tokens == got.usage.total_tokens == counted  # the model's own tokenizer's count
            as_floats = client.embeddings.create(model=embedding.id, input=SENTENCES[:3], encoding_format="float")
            assert np.allclose([i.embedding for i in as_floats.data], [i.embedding for i in got.data], atol=1e-6)
            alone = client.embeddings.create(model="", input=SENTENCES[1], dimensions=384)
            assert np.allclose(alone.data[0].embedding, got.data[1].embedding, atol=1e-4)
            raw = httpx.post(f"{server.address}/v1/embeddings", headers=AUTH, timeout=60,
                             json={"input": ["A man is eating food."], "encoding_format": "base64"}).json()
            row = np.frombuffer(base64.b64decode(raw["data"][0]["embedding"]), dtype="<f4")
            assert row.shape == (384,) and raw["data"][0]["object"] == "embedding"
            thread.call(until(lambda: len(answers.recent_requests) == 4, "the requests logged"))
        logged = {(r.endpoint, r.model, r.status) for r in answers.recent_requests}
    assert logged == {("/v1/embeddings", embedding.id, 200)}
    assert {r.prompt_tokens for r in answers.recent_requests} >= {counted}


@pytest.mark.embedding_model
def test_refusals_name_what_to_change_and_the_process_ends_with_the_service(minilm: tuple[Path, Path],
                                                                            tiny_model: Path, tmp_path: Path) -> None:
    second = build_embedding_gguf(tmp_path / "second-embed.gguf", name="second")  # installed, not the one in use
    with loop_thread() as thread, documents_only(thread, tmp_path, (minilm[0], tiny_model, second)) as (
            service, library, (embedding, chat, other), _heard):
        fake = FakeAnswers(embeddings=ApiEmbeddings(service, library, lambda: ServerSettings(port=0, key=KEY)))
        with serving(thread, fake) as server:
            client = openai_client(server.address)
            with pytest.raises(openai.BadRequestError) as cut:
                client.embeddings.create(model=embedding.id, input=["Short.", TOO_LONG])
            assert cut.value.body["param"] == "input"  # type: ignore[index]
            assert "input[1] is 1," in words(cut.value) and "at most 512 tokens of one input" in words(cut.value)
            with pytest.raises(openai.BadRequestError) as narrow:
                client.embeddings.create(model=embedding.id, input="hello", dimensions=256)
            assert "makes vectors of 384 dimensions and cannot make them 256 wide" in words(narrow.value)
            with pytest.raises(openai.BadRequestError, match="is a chat model: it makes no embeddings"):
                client.embeddings.create(model=chat.id, input="hello")
            with pytest.raises(openai.BadRequestError) as elsewhere:
                client.embeddings.create(model=other.id, input="hello")
            assert f"kestrel docs model {other.id}" in words(elsewhere.value)
            assert client.embeddings.create(model=embedding.id, input="hello").model == embedding.id
            assert len(embedding_children()) == 1  # started by the first request, never indexing
    assert not embedding_children()  # `kestrel serve` never started the service: its close ends the process


def test_without_an_embedding_model_the_400_says_how_to_get_the_catalogs(tmp_path: Path, tiny_model: Path) -> None:
    with loop_thread() as thread, documents_only(thread, tmp_path, (tiny_model,)) as (service, library, _, _h):
        fake = FakeAnswers(embeddings=ApiEmbeddings(service, library, lambda: ServerSettings(port=0, key=KEY)))
        with serving(thread, fake) as server:
            with pytest.raises(openai.BadRequestError) as refused:
                openai_client(server.address).embeddings.create(model="text-embedding-3-small", input="hello")
    said = words(refused.value)
    assert "No embedding model is installed" in said
    assert "kestrel models get all-minilm-l6-v2-q8_0" in said and "all-MiniLM-L6-v2, 25.0 MB" in said
    assert refused.value.body == {"message": said, "type": "invalid_request_error", "param": "model",  # type: ignore
                                  "code": "model_not_found"}


def test_inputs_are_bounded_and_typed_with_a_400_naming_what_is_wrong(tmp_path: Path) -> None:
    def refusal(body: dict[str, object]) -> tuple[str | None, str]:
        answer = httpx.post(f"{server.address}/v1/embeddings", headers=AUTH, json=body, timeout=60)
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        return error["param"], error["message"]

    with loop_thread() as thread, documents_only(thread, tmp_path) as (service, library, _, _heard):
        fake = FakeAnswers(embeddings=ApiEmbeddings(service, library, lambda: ServerSettings(port=0, key=KEY)))
        with serving(thread, fake) as server:
            assert refusal({"input": ["a"] * (MAX_INPUTS + 1)}) == (
                "input", f"input holds 2,049 strings; at most {MAX_INPUTS:,} are accepted in one request. Send them "
                         "in several requests.")
            half = "x" * (MAX_CHARACTERS // 2 + 1)
            assert refusal({"input": [half, half]}) == (
                "input", "input holds 1,000,002 characters in all; at most 1,000,000 are accepted in one request. "
                         "Send them in several requests.")
            assert refusal({"input": ["fine", ""]})[0] == "input[1]"
            assert refusal({"input": []})[1].startswith("input is empty")
            assert refusal({"model": "m"}) == ("input", "input is required: a string or an array of strings.")
            assert "token ids" in refusal({"input": [[15339, 1917], [3]]})[1]
            assert "token ids" in refusal({"input": [15339, 1917]})[1]
            assert refusal({"input": ["a", 3.5]}) == ("input", "input must be a string or an array of strings, "
                                                               "not an array.")
            assert refusal({"input": "a", "encoding_format": "int8"})[0] == "encoding_format"
            assert refusal({"input": "a", "dimensions": 0}) == ("dimensions", "dimensions must be at least 1 (got 0).")


class CountingProcess(EmbeddingProcess):
    """The real embedding process, counting indexing's batches (embed(); the API calls embed_report())."""

    made: list[CountingProcess] = []

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.batches = 0
        CountingProcess.made.append(self)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = super().embed(texts)
        self.batches += 1
        return vectors


@pytest.mark.embedding_model
@pytest.mark.slow
def test_an_api_request_is_answered_between_indexing_batches_and_both_finish(minilm: tuple[Path, Path],
                                                                             tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    notes, batches = 400, 400 // EMBED_BATCH
    for number in range(notes):
        (folder / f"note{number:03}.txt").write_text(
            f"Note {number}: the ferry to island {number} leaves at {number % 24} o'clock from pier {number % 7}, "
            "weather permitting; tickets are sold on board.\n", encoding="utf-8")
    CountingProcess.made.clear()
    with loop_thread() as thread, documents_only(thread, tmp_path, (minilm[0],), started=True,
                                                 embedder=CountingProcess) as (service, library, (embedding,), heard):
        fake = FakeAnswers(embeddings=ApiEmbeddings(service, library, lambda: ServerSettings(port=0, key=KEY)))

        def indexed() -> int:
            return sum(process.batches for process in CountingProcess.made)

        def vectors() -> tuple[int, int]:
            changes = [e for e in heard if isinstance(e, ev.CollectionsChanged)]
            info = changes[-1].collections[0] if changes and changes[-1].collections else None
            return (info.vectors, info.chunks) if info is not None else (0, 0)

        with serving(thread, fake) as server:
            thread.call(service.add_folder(folder))
            thread.call(until(lambda: indexed() >= 1, "indexing making vectors"))
            got = openai_client(server.address).embeddings.create(model=embedding.id, input=SENTENCES[:3])
            assert indexed() < batches, "the request waited for indexing to finish"
            assert_published([item.embedding for item in got.data])
            # The loop thread's own wait must outlast until's 240 s (its default of 60 s cut it short in CI).
            thread.call(until(lambda: vectors() == (notes, notes), "every note's vector", timeout=240), timeout=250)
        assert len(CountingProcess.made) == 1 and indexed() == batches  # one process, shared
        assert not [e for e in heard if isinstance(e, ev.DocumentsProblem)]
        hits = thread.call(service.search("When does the boat to island 123 sail?", ["notes"], 3))
        assert "note123.txt" in [hit.path.name for hit in hits]
    assert len(embedding_children()) == 0


def test_a_crash_of_the_embedding_process_is_a_500_in_words_and_the_server_goes_on(tmp_path: Path) -> None:
    # Its token-type table in f16: llama.cpp loads it, then aborts the process on the first text.
    crashing = build_embedding_gguf(tmp_path / "crashing-embed.gguf", abort_on_embed=True)
    with loop_thread() as thread, documents_only(thread, tmp_path, (crashing,)) as (service, library, _, _heard):
        fake = FakeAnswers(embeddings=ApiEmbeddings(service, library, lambda: ServerSettings(port=0, key=KEY)))
        with serving(thread, fake) as server:
            client = openai_client(server.address)
            for _ in range(2):  # the next request starts a new process, which crashes again
                with pytest.raises(openai.InternalServerError) as crashed:
                    client.embeddings.create(model="", input="the weather is lovely today")
                assert "The embedding process stopped while embedding 1 texts with crashing-embed.gguf" in \
                    words(crashed.value)
                assert crashed.value.body["code"] == "embedding_error"  # type: ignore[index]
            assert client.models.list().data  # the server still answers


@pytest.mark.embedding_model
@pytest.mark.slow
def test_kestrel_serve_answers_with_the_installed_embedding_model(minilm: tuple[Path, Path], tiny_model: Path,
                                                                  kestrel_home: Path) -> None:
    install(tiny_model)
    embedding = import_model_file(ModelLibrary(data_paths().ensure().models), minilm[0])
    port = free_port()
    process = subprocess.Popen(serve_command("--port", str(port)), cwd=ROOT, env=serve_env(kestrel_home),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = read_ready(process)
        with openai.OpenAI(base_url=f"{ready.address}/v1", api_key=ready.key, max_retries=0, timeout=60) as client:
            got = client.embeddings.create(model="text-embedding-3-small", input=SENTENCES[:3])
        assert got.model == embedding.id
        assert_published([item.embedding for item in got.data])
    finally:
        _, err = interrupt(process)
    assert process.returncode == 0, err
    assert f" /v1/embeddings 200 {embedding.id}" in err  # logged as every request is
