"""Error bodies in each provider's shape, so that the official clients raise their own errors."""

from __future__ import annotations

from enum import StrEnum

from starlette.responses import JSONResponse

from app.service.api.api_answers import ApiRefused

# Anthropic's error type per HTTP status (https://docs.anthropic.com/en/api/errors).
_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                    503: "overloaded_error"}


class Flavor(StrEnum):
    """Whose API a request speaks: its errors take that provider's shape."""

    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    OLLAMA = "ollama"


class BadRequest(Exception):
    """A request the server refuses before the service sees it: plain words naming the field."""

    def __init__(self, message: str, param: str | None = None, *, status: int = 400,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status
        self.code = code


def error_body(flavor: Flavor, status: int, message: str, param: str | None = None,
               code: str | None = None) -> dict[str, object]:
    """The JSON body of an error, as OpenAI, Anthropic or Ollama write theirs."""
    if flavor is Flavor.OLLAMA:  # {"error": "..."}: what Ollama's clients read (ollama-python's ResponseError)
        return {"error": message}
    if flavor is Flavor.ANTHROPIC:
        kind = _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_response(flavor: Flavor, status: int, message: str, param: str | None = None,
                   code: str | None = None, retry_after: int | None = None) -> JSONResponse:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return JSONResponse(error_body(flavor, status, message, param, code), status_code=status, headers=headers)


def bad_request_response(flavor: Flavor, problem: BadRequest) -> JSONResponse:
    return error_response(flavor, problem.status, problem.message, problem.param, problem.code)


def refused_response(flavor: Flavor, refused: ApiRefused) -> JSONResponse:
    """The service's refusal (unknown model, context too long, queue full ...) as the client expects it."""
    return error_response(flavor, refused.status, refused.message, refused.param, refused_code(refused),
                          refused.retry_after)


def refused_code(refused: ApiRefused) -> str | None:
    """The refusal's code, left out where it only repeats the error's type."""
    return None if refused.code == "invalid_request_error" else refused.code
