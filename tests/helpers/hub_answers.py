"""Hugging Face's model search served on 127.0.0.1: a fixture answer at the address the app asks.

The address is written out here, not taken from app.library.huggingface.hub_search, so a change to
the parameters the app sends fails the tests instead of following along.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote_plus

from tests.helpers.http_servers import Served, TestServer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hub"
THINKER_ANSWER = FIXTURES / "search-thinker-gguf.json"
EMPTY_ANSWER = FIXTURES / "search-empty.json"
# A real answer of huggingface.co's model search, recorded by another project (see the README there).
RECORDED_ANSWER = FIXTURES / "recorded-gguf-trending-2026-08-07.json"
# list_models(expand=[...]): one "expand" per field, in the order app.library.huggingface.hub_search asks.
_EXPAND = "".join(f"&expand={field}" for field in
                  ("downloads", "likes", "lastModified", "tags", "pipeline_tag", "gated", "private"))


def search_path(query: str, limit: int = 20, fmt: str = "gguf") -> str:
    """The path (and query string) of a search, as huggingface_hub's list_models sends it."""
    return (f"/api/models?filter={fmt}&search={quote_plus(query)}&sort=downloads"
            f"&limit={limit}{_EXPAND}")


def serve_search(front: TestServer, query: str, answer: Path | bytes = THINKER_ANSWER, limit: int = 20,
                 fmt: str = "gguf", **behaviour: object) -> str:
    """Answer a search for query on front with answer (a fixture file or bytes); the path."""
    body = answer.read_bytes() if isinstance(answer, Path) else answer
    path = search_path(query, limit, fmt)
    front.files[path] = Served(body=body, **behaviour)  # type: ignore[arg-type]
    return path
