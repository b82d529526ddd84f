"""Embedding models in the library: told apart from chat models by their GGUF header, kept in
model.json, offered to document search and never to chat."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFWriter, PoolingType

from app.engine.backends.backend import DeviceChoice
from app.engine.backends.llama.gguf_backend import GgufBackend
from app.engine.protocol import Load
from app.library.model_files.gguf_info import ModelFileError, read_gguf_info
from app.library.model_details import gguf_details
from app.library.model_files.model_purpose import ModelPurpose, gguf_purpose
from app.library.models import ModelLibrary
from tests.helpers.embedding_gguf import build_embedding_gguf


@pytest.fixture(scope="module")
def tiny_embed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_embedding_gguf(tmp_path_factory.mktemp("embed") / "tiny-embed.gguf")


def _header_only(path: Path, architecture: str, pooling: PoolingType | None) -> Path:
    """A GGUF with one small tensor and the settings the purpose is read from."""
    writer = GGUFWriter(path, architecture)
    writer.add_block_count(1)
    if pooling is not None:
        writer.add_pooling_type(pooling)
    writer.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_the_header_tells_embedding_chat_and_rerank_models_apart(tiny_model: Path, tiny_embed: Path,
                                                                 tmp_path: Path) -> None:
    assert gguf_purpose(read_gguf_info(tiny_embed)) is ModelPurpose.EMBEDDING
    assert gguf_purpose(read_gguf_info(tiny_model)) is ModelPurpose.CHAT
    # A decoder architecture with a pooling type is an embedding model built on it (Qwen3-Embedding).
    qwen_embedding = _header_only(tmp_path / "q.gguf", "qwen3", PoolingType.LAST)
    assert gguf_purpose(read_gguf_info(qwen_embedding)) is ModelPurpose.EMBEDDING
    assert gguf_purpose(read_gguf_info(_header_only(tmp_path / "c.gguf", "qwen3", None))) is ModelPurpose.CHAT
    assert gguf_purpose(read_gguf_info(_header_only(tmp_path / "r.gguf", "bert", PoolingType.RANK))) \
        is ModelPurpose.RERANK
    # An encoder-only architecture never chats, whatever its pooling says.
    assert gguf_purpose(read_gguf_info(_header_only(tmp_path / "g.gguf", "gemma-embedding", None))) \
        is ModelPurpose.EMBEDDING


def test_details_tag_an_embedding_model(tiny_embed: Path) -> None:
    details = gguf_details(read_gguf_info(tiny_embed))
    assert (details["purpose"], details["capabilities"]) == ("embedding", ["embedding"])


def test_the_library_keeps_the_purpose_and_never_offers_an_embedding_model_to_chat(
        tiny_model: Path, tiny_embed: Path, kestrel_home: Path) -> None:
    library = ModelLibrary(kestrel_home / "models")
    embed = library.add_reference(tiny_embed)
    assert embed.purpose is ModelPurpose.EMBEDDING and not embed.chats
    # Only an embedding model: nothing to chat with, even when it is the one chosen.
    assert library.default(None) is None and library.default(embed.id) is None
    chat = library.add_reference(tiny_model)
    assert library.default(embed.id) == chat and library.default(None) == chat
    assert library.chat_models() == [chat] and library.embedding_models() == [embed]
    # Document search's one rule (the window and the CLI): the model chosen if it embeds, else the oldest.
    assert library.embedding_model(None) == embed and library.embedding_model(embed.id) == embed
    assert library.embedding_model(chat.id) is None and library.embedding_model("nothing-like-it") is None
    recorded = kestrel_home / "models" / embed.id / "model.json"
    data = json.loads(recorded.read_text(encoding="utf-8"))
    assert data["purpose"] == "embedding"
    # A model.json written before the purpose was kept: read from the header.
    del data["purpose"]
    recorded.write_text(json.dumps(data), encoding="utf-8")
    assert library.get(embed.id).purpose is ModelPurpose.EMBEDDING  # type: ignore[union-attr]


def test_loading_an_embedding_model_to_chat_is_refused_in_plain_words(tiny_embed: Path) -> None:
    with pytest.raises(ModelFileError) as refused:
        GgufBackend.load(Load(request_id=1, model_path=str(tiny_embed), context_length=128),
                         DeviceChoice("cpu", "test"))
    assert refused.value.kind == "not_for_chat"
    assert refused.value.message.startswith("kestrel-tiny-embed is an embedding model: it turns text into "
                                            "vectors for searching documents (kestrel docs) and cannot chat.")


def test_kestrel_chat_refuses_an_embedding_model_through_the_engine(tiny_embed: Path) -> None:
    """The refusal comes from the engine process, as the window's and the API's loads get it."""
    result = subprocess.run([sys.executable, "-m", "app", "chat", "--model", str(tiny_embed), "hello"],
                            cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=120)
    assert result.returncode == 3 and "Traceback" not in result.stderr
    assert result.stderr == ("kestrel: kestrel-tiny-embed is an embedding model: it turns text into vectors for "
                             "searching documents (kestrel docs) and cannot chat. Choose a chat model instead "
                             "(kestrel models list).\n")
