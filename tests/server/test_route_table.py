"""One route table: the endpoints the server names (its home page, a 404's words) are the routes it serves,
and an endpoint added to a provider's routes is served and named with no other edit (CONTRIBUTING.md,
"Where to add: an API endpoint")."""

from __future__ import annotations

import httpx2 as httpx
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.server.openai_routes import OpenAiEndpoints
from tests.server.helpers import KEY, FakeAnswers, loop_thread, serving

AUTH = {"Authorization": f"Bearer {KEY}"}
SERVED = ("GET /v1/models", "GET /v1/models/{model_id}", "POST /v1/chat/completions", "POST /v1/completions",
          "POST /v1/embeddings", "POST /v1/responses", "POST /v1/messages", "GET /api/version", "GET /api/tags",
          "GET /api/ps", "POST /api/show", "POST /api/chat", "POST /api/generate", "POST /api/embed",
          "POST /api/embeddings", "POST /v1/audio/transcriptions", "POST /v1/audio/speech")


def test_the_home_page_and_a_404_name_exactly_the_routes_served() -> None:
    with loop_thread() as thread, serving(thread, FakeAnswers()) as server:
        home = httpx.get(f"{server.address}/", timeout=10)
        missing = httpx.get(f"{server.address}/v1/nothing", headers=AUTH, timeout=10)
    assert home.status_code == 200 and home.text == "Kestrel's API server is running. Endpoints: " + \
        ", ".join(SERVED) + "\n"
    assert missing.status_code == 404
    assert missing.json()["error"]["message"].endswith("It answers " + ", ".join(SERVED) + ".")


def test_an_endpoint_added_to_a_providers_routes_is_served_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    async def ping(request: Request) -> Response:
        return JSONResponse({"object": "pong"})

    routes = OpenAiEndpoints.routes
    monkeypatch.setattr(OpenAiEndpoints, "routes",
                        lambda self: [*routes(self), Route("/v1/ping", ping, methods=["GET"])])
    with loop_thread() as thread, serving(thread, FakeAnswers()) as server:
        pong = httpx.get(f"{server.address}/v1/ping", headers=AUTH, timeout=10)
        home = httpx.get(f"{server.address}/", timeout=10)
        without_key = httpx.get(f"{server.address}/v1/ping", timeout=10)
    assert pong.status_code == 200 and pong.json() == {"object": "pong"}
    assert "GET /v1/ping" in home.text
    assert without_key.status_code == 401  # behind the gate like every other endpoint
