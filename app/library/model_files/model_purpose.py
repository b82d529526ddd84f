"""What a model is for: chat, or turning text into vectors (an embedding model), read from its GGUF header."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from app.library.model_files.gguf_info import GgufInfo, ModelFileError, read_gguf_info
from app.library.model_files.model_format import ModelFormat


class ModelPurpose(StrEnum):
    """Written to model.json; values are never reused for another meaning."""

    CHAT = "chat"
    EMBEDDING = "embedding"  # text in, one vector out: document search (app/documents)
    RERANK = "rerank"  # scores a query against a text: neither chats nor embeds


# llama.cpp's architectures that only encode (no causal language-model head): a GGUF of
# one of them can never chat, whatever its pooling says (llama-arch.cpp's names).
EMBEDDING_ARCHITECTURES = frozenset({
    "bert", "modern-bert", "nomic-bert", "nomic-bert-moe", "neo-bert", "jina-bert-v2", "jina-bert-v3",
    "t5encoder", "gemma-embedding",
})
# llama_pooling_type as convert_hf_to_gguf writes `{arch}.pooling_type`: a decoder
# architecture (qwen3, llama) with a pooling type set is an embedding model built on it
# (Qwen3-Embedding: last-token pooling); rank pooling marks a reranker.
_POOLING_NONE = 0
_POOLING_RANK = 4


def gguf_purpose(info: GgufInfo) -> ModelPurpose:
    """Chat, embedding or rerank, from the architecture and the pooling type the header states."""
    pooling = info.metadata.get(f"{info.architecture}.pooling_type")
    if type(pooling) is int and pooling == _POOLING_RANK:
        return ModelPurpose.RERANK
    if info.architecture in EMBEDDING_ARCHITECTURES:
        return ModelPurpose.EMBEDDING
    if type(pooling) is int and pooling != _POOLING_NONE:
        return ModelPurpose.EMBEDDING
    return ModelPurpose.CHAT


def purpose_at(path: Path, format: ModelFormat) -> ModelPurpose:
    """The purpose of the model at path (a split GGUF: its first part). An ONNX GenAI folder
    holds a chat model; a file that cannot be read is taken as chat, and loading it says why."""
    if format != "gguf":
        return ModelPurpose.CHAT
    try:
        return gguf_purpose(read_gguf_info(path))
    except (ModelFileError, OSError):
        return ModelPurpose.CHAT


def recorded_purpose(recorded: object) -> ModelPurpose | None:
    """The purpose model.json keeps, or None when it keeps none this Kestrel knows."""
    for known in ModelPurpose:
        if recorded == known.value:
            return known
    return None


def not_for_chat(title: str, purpose: ModelPurpose) -> str | None:
    """Why a model cannot chat, in plain words with what to do; None if it can."""
    if purpose is ModelPurpose.EMBEDDING:
        return (f"{title} is an embedding model: it turns text into vectors for searching documents "
                "(kestrel docs) and cannot chat. Choose a chat model instead (kestrel models list).")
    if purpose is ModelPurpose.RERANK:
        return (f"{title} is a reranking model: it scores texts against a question and cannot chat. "
                "Choose a chat model instead (kestrel models list).")
    return None
