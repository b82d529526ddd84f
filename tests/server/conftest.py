"""Every official client a test made is closed after it (an open one is a ResourceWarning); the
real all-MiniLM-L6-v2 GGUF for /v1/embeddings, built as tests/documents builds it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.documents.test_embedding_model import minilm
from tests.server.helpers import OPEN_CLIENTS

__all__ = ["minilm"]  # a fixture: (the GGUF scripts/make_embedding_gguf.py writes, the model's own files)


@pytest.fixture(autouse=True)
def close_clients() -> Iterator[None]:
    yield
    while OPEN_CLIENTS:
        OPEN_CLIENTS.pop().close()
