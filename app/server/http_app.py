"""The Starlette application: every endpoint behind the gate, CORS only for the origins the user listed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from app.core.server_settings import ServerSettings
from app.server.anthropic_routes import AnthropicEndpoint
from app.server.audio_routes import AudioEndpoints
from app.server.errors import error_response
from app.server.gate import Gate, flavor_of
from app.server.ollama_replies import error as ollama_error
from app.server.ollama_routes import OllamaEndpoints
from app.server.openai_routes import OpenAiEndpoints
from app.server.responses_route import ResponsesEndpoint
from app.server.speech_routes import SpeechEndpoints
from app.service.api.api_answers import ApiAnswers

def endpoint_list(routes: list[Route]) -> tuple[str, ...]:
    """"GET /v1/models", "POST /v1/chat/completions", …: read from the one route table, so the words
    that name the endpoints (the home page, a 404) never drift from what is served."""
    return tuple(f"{method} {route.path_format}" for route in routes if route.path != "/"
                 for method in sorted((route.methods or set()) - {"HEAD"}))


def _home(endpoints: tuple[str, ...]) -> Callable[[Request], Awaitable[Response]]:
    async def home(request: Request) -> Response:
        return PlainTextResponse("Kestrel's API server is running. Endpoints: " + ", ".join(endpoints) + "\n")

    return home


def _not_found(endpoints: tuple[str, ...]) -> Callable[[Request, Exception], Awaitable[Response]]:
    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 404
        what = "takes no" if status == 405 else "has no"
        words = (f"Kestrel's API server {what} {request.method} {request.url.path}. "
                 f"It answers {', '.join(endpoints)}.")
        if request.url.path.startswith("/api/"):  # Ollama's shape, which its clients read
            return ollama_error(status, words)
        return error_response(flavor_of(request.url.path), status, words)

    return not_found


def build_app(answers: ApiAnswers, settings: Callable[[], ServerSettings],
              admits: Callable[[str], bool] | None = None) -> tuple[ASGIApp, Gate]:
    """The application and its gate (whose end_requests() the runner calls on stop); admits: Gate's.

    CORS goes outside the gate, so that a browser's preflight needs no key and a 401 still
    carries the headers that let the page read it.
    """
    routes = [*OpenAiEndpoints(answers).routes(), *ResponsesEndpoint(answers).routes(),
              *AnthropicEndpoint(answers).routes(), *OllamaEndpoints(answers).routes(), *AudioEndpoints(answers.voice.transcriptions).routes(),
              *SpeechEndpoints(answers.voice.speeches).routes()]
    served = endpoint_list(routes)
    not_found = _not_found(served)
    endpoints = Starlette(routes=[Route("/", _home(served), methods=["GET"]), *routes],
                          exception_handlers={404: not_found, 405: not_found})
    gate = Gate(endpoints, answers, settings, admits)
    origins = settings().cors_origins
    if not origins:  # off unless the user listed origins: no web page may call a local model unasked
        return gate, gate
    return CORSMiddleware(gate, allow_origins=list(origins), allow_methods=["GET", "POST"], allow_headers=["*"],
                          max_age=600), gate
