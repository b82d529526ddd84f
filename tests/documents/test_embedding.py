"""The embedding process on the tiny BERT GGUF: vectors, batching, truncation, and a child
that crashes, hangs or cannot load becoming an EmbeddingError while the caller goes on."""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import pytest

from app.documents.embedding import EmbeddingError, EmbeddingProcess
from tests.helpers.embedding_gguf import build_embedding_gguf

CONTEXT = 128  # the tiny model's trained context
TEXTS = ["The weather is lovely today.", "the cat sat on the mat", "A report about the river bank.",
         "", "Kestrel answers a question from a document."]


class Embedder(Protocol):
    """The shape app/documents/search.py injects (its Embedder protocol)."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


@pytest.fixture(scope="module")
def tiny_embedding_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_embedding_gguf(tmp_path_factory.mktemp("embed") / "tiny-embed.gguf", n_ctx_train=CONTEXT)


@pytest.fixture(scope="module")
def embedder(tiny_embedding_model: Path) -> Iterator[EmbeddingProcess]:
    with EmbeddingProcess(tiny_embedding_model, threads=1) as process:
        yield process


def test_vectors_are_unit_length_float32_rows_one_per_text_in_order(embedder: EmbeddingProcess) -> None:
    as_embedder: Embedder = embedder
    vectors = as_embedder.embed(TEXTS)
    assert len(vectors) == len(TEXTS)
    assert all(len(row) == embedder.dimensions == 32 for row in vectors)
    matrix = np.array(vectors)
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(matrix, matrix.astype(np.float32))  # float32 values, widened only by tolist
    alone = np.array([embedder.embed([text])[0] for text in TEXTS])
    assert np.allclose(matrix, alone, atol=1e-5), "a batch gave another vector than the text alone"
    different = matrix @ matrix.T
    assert all(different[i, j] < 0.9999 for i in range(len(TEXTS)) for j in range(len(TEXTS)) if i != j)


def test_same_text_same_vector_in_a_fresh_process(embedder: EmbeddingProcess, tiny_embedding_model: Path) -> None:
    first = embedder.embed(TEXTS[:2])
    with EmbeddingProcess(tiny_embedding_model, threads=1) as other:
        assert other.model_id == embedder.model_id
        assert np.allclose(other.embed(TEXTS[:2]), first, atol=1e-6)


def test_model_id_names_the_model_and_its_file(embedder: EmbeddingProcess, tmp_path: Path) -> None:
    assert embedder.model_id.startswith("kestrel-tiny-embed:")
    other = build_embedding_gguf(tmp_path / "other.gguf", n_ctx_train=CONTEXT, seed=1)
    with EmbeddingProcess(other, threads=1) as process:
        assert process.model_id.startswith("kestrel-tiny-embed:")
        assert process.model_id != embedder.model_id  # same name, other weights: other vectors


def test_many_texts_go_in_several_requests_and_keep_their_order(tiny_embedding_model: Path) -> None:
    texts = [f"document page {n} " + "the chunk " * (n % 7) for n in range(150)]
    with EmbeddingProcess(tiny_embedding_model, threads=1, texts_per_request=64) as process:
        report = process.embed_report(texts)
        assert report.vectors.shape == (150, 32) and report.vectors.dtype == np.float32
        assert report.truncated == ()
        for n in (0, 63, 64, 65, 149):
            assert np.allclose(report.vectors[n], process.embed([texts[n]])[0], atol=1e-5)


def test_no_texts_give_no_vectors_and_one_string_is_refused(embedder: EmbeddingProcess) -> None:
    assert embedder.embed([]) == []
    with pytest.raises(TypeError):
        embedder.embed("one string")  # type: ignore[arg-type]


def test_a_text_longer_than_the_context_is_cut_and_said(embedder: EmbeddingProcess,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    head = "the model " * 100  # 200 word tokens, more than the 128 of the context
    short, long_a, long_b = "a short one", head + "river water fire", head + "bank money python"
    with caplog.at_level(logging.WARNING, logger="app.documents.embedding"):
        vectors = embedder.embed([short, long_a, long_b])
    report = embedder.embed_report([short, long_a, long_b])
    assert [(cut.index, cut.kept) for cut in report.truncated] == [(1, CONTEXT), (2, CONTEXT)]
    assert all(cut.tokens > CONTEXT for cut in report.truncated)
    assert "Embedding text 1: " in caplog.text and f"only the first {CONTEXT}" in caplog.text
    assert np.allclose(vectors[1], vectors[2], atol=1e-6), "the different tails were embedded"


def test_max_tokens_sets_a_shorter_context(tiny_embedding_model: Path) -> None:
    with EmbeddingProcess(tiny_embedding_model, threads=1, max_tokens=16) as process:
        assert process.max_tokens == 16
        report = process.embed_report(["the " * 30, "the cat"])
        assert [(cut.index, cut.kept) for cut in report.truncated] == [(0, 16)]
    with EmbeddingProcess(tiny_embedding_model, threads=1, max_tokens=10_000) as process:
        assert process.max_tokens == CONTEXT  # never past what the model was trained for


def test_a_native_crash_becomes_an_embedding_error(tmp_path: Path) -> None:
    broken = build_embedding_gguf(tmp_path / "aborts.gguf", n_ctx_train=CONTEXT, abort_on_embed=True)
    with EmbeddingProcess(broken, threads=1) as process:
        assert process.dimensions == 32  # it loads; llama.cpp aborts on the first batch
        with pytest.raises(EmbeddingError, match=r"stopped while embedding 2 texts with aborts\.gguf \(ended by signal"):
            process.embed(["the cat", "the dog"])
        assert process.pid is None


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and SIGSTOP are POSIX signals")
def test_a_killed_child_is_reported_and_the_next_call_starts_a_fresh_one(tiny_embedding_model: Path) -> None:
    with EmbeddingProcess(tiny_embedding_model, threads=1) as process:
        before = process.embed(["the cat"])
        pid = process.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(EmbeddingError, match=f"ended by signal {int(signal.SIGKILL)}"):
            process.embed(["the cat"])
        assert np.allclose(process.embed(["the cat"]), before, atol=1e-6)
        assert process.pid not in (None, pid)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGSTOP is a POSIX signal")
def test_a_hung_child_is_ended_after_the_time_limit(tiny_embedding_model: Path) -> None:
    with EmbeddingProcess(tiny_embedding_model, threads=1, request_timeout_s=1.0) as process:
        pid = process.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        with pytest.raises(EmbeddingError, match="did not answer within 1 s while embedding 1 texts"):
            process.embed(["the cat"])
        assert process.pid is None
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # killed and reaped, not left stopped
        assert len(process.embed(["the cat"])[0]) == 32


def test_a_file_that_is_not_a_model_is_a_plain_load_error(tmp_path: Path) -> None:
    junk = tmp_path / "notes.gguf"
    junk.write_bytes(b"this is not a GGUF file at all" * 10)
    with pytest.raises(EmbeddingError, match=r"Could not load the embedding model notes\.gguf: .*Pick another"):
        EmbeddingProcess(junk, threads=1).start()
    with pytest.raises(EmbeddingError, match="does not exist"):
        EmbeddingProcess(tmp_path / "gone.gguf").embed(["text"])


def test_close_ends_the_child_and_can_be_called_twice(tiny_embedding_model: Path) -> None:
    process = EmbeddingProcess(tiny_embedding_model, threads=1)
    process.start()
    pid = process.pid
    assert pid is not None and process.rss_bytes > 0
    process.close()
    process.close()
    assert process.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
