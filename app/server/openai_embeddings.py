"""OpenAI's /v1/embeddings shape: the request read into an EmbeddingAsk, the vectors written as OpenAI lists them."""

from __future__ import annotations

import array
import base64
import json
import sys
from dataclasses import dataclass

from app.server.errors import BadRequest
from app.server.fields import Body
from app.service.api.api_answers import EmbeddingAsk, Embeddings

ENCODINGS = ("float", "base64")


@dataclass(frozen=True)
class AskedEmbeddings:
    """The service's request, and how the vectors go back (base64: little-endian float32 bytes)."""

    ask: EmbeddingAsk
    base64: bool


def input_texts(body: Body) -> tuple[str, ...]:
    """An embedding request's `input`, a string or an array of strings (OpenAI's and Ollama's alike)."""
    value = body.data.get("input")
    if value is None:
        raise body.missing("input", "a string or an array of strings")
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise body.wrong("input", "a string or an array of strings")


def embedding_ask(body: Body, client: str) -> AskedEmbeddings:
    """POST /v1/embeddings: `input` a string or an array of strings; token ids are refused (they are
    ids in OpenAI's tokenizer, not in the model's)."""
    value = body.data.get("input")
    if isinstance(value, list) and not all(isinstance(item, str) for item in value) and _holds_token_ids(value):
        raise BadRequest("input holds token ids, which Kestrel does not take: they are ids in OpenAI's tokenizer, "
                         "and Kestrel's embedding model has its own. Send the text instead.", "input")
    texts = input_texts(body)
    encoding = body.text("encoding_format") or "float"
    if encoding not in ENCODINGS:
        raise BadRequest(f"encoding_format must be float or base64, not {encoding!r}.", "encoding_format")
    body.text("user")  # OpenAI's end-user id: nothing to do with it here, but it must be a string
    ask = EmbeddingAsk(client=client, model=body.text("model"), texts=texts,
                       dimensions=body.integer("dimensions", low=1))
    return AskedEmbeddings(ask, encoding == "base64")


def embedding_list(got: Embeddings, as_base64: bool) -> bytes:
    """The JSON body OpenAI answers with (a CreateEmbeddingResponse): one entry per input, in order.
    Built off the event loop: 2,048 vectors of 1,024 numbers are seconds of JSON."""
    data = [{"object": "embedding", "index": index, "embedding": _shown(row, as_base64)}
            for index, row in enumerate(got.rows)]
    # Only prompt tokens: an embedding writes none.
    usage = {"prompt_tokens": got.prompt_tokens, "total_tokens": got.prompt_tokens}
    return json.dumps({"object": "list", "data": data, "model": got.model, "usage": usage},
                      separators=(",", ":")).encode()


def _shown(row: bytes, as_base64: bool) -> str | list[float]:
    if as_base64:
        return base64.b64encode(row).decode("ascii")
    numbers = array.array("f", row)
    if sys.byteorder != "little":
        numbers.byteswap()
    return numbers.tolist()


def _holds_token_ids(value: list[object]) -> bool:
    """An array of token ids, or an array of such arrays (what OpenAI's tiktoken users send)."""
    return all(_is_id(item) for item in value) or all(
        isinstance(item, list) and all(_is_id(i) for i in item) for item in value)


def _is_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
