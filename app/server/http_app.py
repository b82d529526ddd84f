"""The Starlette application: every endpoint behind the gate, CORS only for the origins the user listed."""

from __future__ import annotations

from collections.abc import Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from app.core.server_settings import ServerSettings
from app.server.anthropic_routes import AnthropicEndpoint
from app.server.errors import error_response
from app.server.gate import Gate, flavor_of
from app.server.openai_routes import OpenAiEndpoints
from app.server.responses_route import ResponsesEndpoint
from app.service.api.api_answers import ApiAnswers

ENDPOINTS = ("GET /v1/models", "POST /v1/chat/completions", "POST /v1/completions", "POST /v1/embeddings",
             "POST /v1/responses", "POST /v1/messages")


async def _home(request: Request) -> Response:
    return PlainTextResponse("Kestrel's API server is running. Endpoints: " + ", ".join(ENDPOINTS) + "\n")


async def _not_found(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 404
    what = "takes no" if status == 405 else "has no"
    return error_response(flavor_of(request.url.path), status,
                          f"Kestrel's API server {what} {request.method} {request.url.path}. "
                          f"It answers {', '.join(ENDPOINTS)}.")


def build_app(answers: ApiAnswers, settings: Callable[[], ServerSettings]) -> tuple[ASGIApp, Gate]:
    """The application and its gate (whose end_requests() the runner calls on stop).

    CORS goes outside the gate, so that a browser's preflight needs no key and a 401 still
    carries the headers that let the page read it.
    """
    routes = [Route("/", _home, methods=["GET"]), *OpenAiEndpoints(answers).routes(),
              *ResponsesEndpoint(answers).routes(), *AnthropicEndpoint(answers).routes()]
    endpoints = Starlette(routes=routes, exception_handlers={404: _not_found, 405: _not_found})
    gate = Gate(endpoints, answers, settings)
    origins = settings().cors_origins
    if not origins:  # off unless the user listed origins: no web page may call a local model unasked
        return gate, gate
    return CORSMiddleware(gate, allow_origins=list(origins), allow_methods=["GET", "POST"], allow_headers=["*"],
                          max_age=600), gate
