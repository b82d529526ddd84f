"""The search the app sends is the one huggingface_hub's HfApi.list_models sends, and the
constructed fixture parses with huggingface_hub's own ModelInfo (the test tools bring
huggingface_hub in with transformers; the app itself does not depend on it)."""

from __future__ import annotations

import pytest

from app.library.huggingface.hub_search import EXPANDED, search_models
from tests.helpers.http_servers import TestServer
from tests.helpers.hub_answers import THINKER_ANSWER, serve_search

hf_api = pytest.importorskip("huggingface_hub.hf_api")


@pytest.mark.parametrize("query", ["thinker", "tiny llama & co/7B"])
def test_the_app_sends_what_list_models_sends(server: TestServer, query: str) -> None:
    serve_search(server, query)
    api = hf_api.HfApi(endpoint=server.base, token=False)

    theirs = list(api.list_models(filter="gguf", search=query, sort="downloads", limit=20, expand=list(EXPANDED)))
    ours = search_models(query, server.base)

    first, second = (entry.path for entry in server.requests("GET"))
    assert first == second, "the same address, byte for byte"
    assert [(m.id, m.downloads, m.likes, bool(m.gated)) for m in theirs] == \
        [(r.id, r.downloads, r.likes, r.gated) for r in ours]
    assert [m.last_modified.date().isoformat() for m in theirs] == [r.updated for r in ours]


def test_the_fixture_is_a_list_of_what_model_info_reads() -> None:
    import json

    for item in json.loads(THINKER_ANSWER.read_bytes()):
        info = hf_api.ModelInfo(**item)
        assert info.id == item["id"] and info.tags == item["tags"] and info.private is False
