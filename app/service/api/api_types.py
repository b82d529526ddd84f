"""What the API server and the service say to each other: a request's answer, a refusal, a model."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.engine.protocol import AnswerShape, ChatMessage
from app.service.api.api_model_facts import ModelFacts


@dataclass(frozen=True)
class ApiImage:
    """An image a request sent inline, as it sent it: decoded from base64, not yet checked.

    turn: the index in ApiAsk.messages of the (user) turn it belongs to; part: where it was in
    the request ("messages[1].content[0].image_url.url"), which every refusal names.
    """

    turn: int
    part: str
    data: bytes


@dataclass(frozen=True)
class ApiAsk:
    """One request's answer, in the service's terms (the server translates the HTTP shapes).

    model: the id or title the client named (None or "": the loaded model, else the
    default). settings: GenerationSettings fields the request sets, over the model's own
    defaults. context_length: the context this request wants (None: as loaded).
    images: the request's images, unchecked; the service checks each and puts it in its
    turn's ChatMessage.images (the messages here carry none).
    """

    endpoint: str
    client: str
    model: str | None
    messages: tuple[ChatMessage, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)
    stop: tuple[str, ...] = ()
    context_length: int | None = None
    shape: AnswerShape = AnswerShape()
    images: tuple[ApiImage, ...] = ()
    # The request's field that holds shape.json_schema ("response_format.json_schema.schema"): a schema the
    # engine cannot follow is refused naming it, as the server names every field it refuses.
    schema_param: str | None = None


class ApiRefused(Exception):
    """A request Kestrel will not answer: an HTTP status and plain words naming what to change."""

    def __init__(self, status: int, message: str, *, param: str | None = None,
                 code: str = "invalid_request_error", retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.retry_after = retry_after


@dataclass(frozen=True)
class ApiModel:
    """A model as /v1/models lists it."""

    id: str
    name: str
    context_length: int | None  # the longest context it was made for (None: not stated)
    format: str
    loaded: bool
    created: int
    vision: bool = False  # a vision projector is paired with it: it takes images
    size: int = 0  # bytes on disk, all its files
    sha256: str | None = None  # of its file, where the library knows it (a verified download)
    # Read only when asked (ApiAnswers.models(described=True)): what its file states, and the
    # sampling settings it answers with unless a request sets others.
    facts: ModelFacts | None = None
    sampling: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Started:
    """The first event of every answer: the model that answers and its context."""

    model: str
    context_length: int


@dataclass(frozen=True)
class EmbeddingAsk:
    """One /v1/embeddings request in the service's terms (the server reads the HTTP shape).

    texts: the inputs, in order. model: the name the client sent (None or "": the embedding
    model the documents use). dimensions: the width the client wants (None: the model's own).
    """

    client: str
    model: str | None
    texts: tuple[str, ...]
    dimensions: int | None = None


@dataclass(frozen=True)
class Embeddings:
    """The answer to an EmbeddingAsk: row i is text i's vector, unit length, as `dimensions`
    little-endian float32 numbers (the bytes OpenAI's base64 form carries)."""

    model: str
    dimensions: int
    rows: tuple[bytes, ...]
    prompt_tokens: int
