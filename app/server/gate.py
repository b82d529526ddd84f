"""The ASGI layer in front of every endpoint: the key (or key-less mode's checks), the request log,
and ending requests on stop."""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Callable
from datetime import datetime

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.server_settings import ServerSettings, is_loopback
from app.server.errors import Flavor, error_response
from app.server.keyless import Refusal, keyless_refusal
from app.server.runs import OUTCOME_KEY, Outcome
from app.service.api.api_answers import ApiAnswers
from app.service.events import RequestRecord

NO_KEY = ("This request has no valid API key. Send the key that Kestrel shows with its API server as "
          "`Authorization: Bearer <key>` (or as `x-api-key: <key>`).")
NOT_PAIRED = ("This device is not paired with this Kestrel, or it was removed from its paired devices. Pair it "
              "again: make a pairing code on the sharing PC (View → API server…, or kestrel link code), then add the "
              "server again here with that code.")
TURNED_OFF = "Kestrel's API server was turned off while this request waited. Try again once it is on."
_DISCONNECT: Message = {"type": "http.disconnect"}


def flavor_of(path: str) -> Flavor:
    if path.startswith("/api/"):
        return Flavor.OLLAMA
    return Flavor.ANTHROPIC if path.startswith("/v1/messages") else Flavor.OPENAI


def key_given(scope: Scope) -> str:
    """The key a request carries: `Authorization: Bearer KEY` (OpenAI) or `x-api-key: KEY` (Anthropic)."""
    headers = {name.lower(): value for name, value in scope.get("headers", [])}
    bearer = headers.get(b"authorization", b"").decode("latin-1").strip()
    if bearer[:7].lower() == "bearer ":
        return bearer[7:].strip()
    return headers.get(b"x-api-key", b"").decode("latin-1").strip()


def has_key(scope: Scope, settings: ServerSettings) -> bool:
    """Whether the request carries the server's key."""
    # compare_digest: the time taken says nothing about how much of the key was right.
    return bool(settings.key) and hmac.compare_digest(key_given(scope).encode(), settings.key.encode())


def refusal(scope: Scope, settings: ServerSettings) -> Refusal | None:
    """None if the request may pass: it has the key, or (if the user allowed it) it comes from a
    program on this PC and shows what key-less mode asks (app/server/keyless.py); else why not."""
    if has_key(scope, settings):
        return None
    peer = scope.get("client")
    if settings.keyless_loopback and peer is not None and is_loopback(str(peer[0])):
        return keyless_refusal(scope, settings)
    return Refusal(401, NO_KEY)


class Gate:
    """Checks the key, reports each finished /v1 request to answers.log, and lets stop() end
    every request still open as if its client had gone (their answers are cancelled).

    admits: for the sharing server (Kestrel Link), whether a key is a paired device's; it replaces the
    server's key and key-less mode there, so only paired devices are let in."""

    def __init__(self, app: ASGIApp, answers: ApiAnswers, settings: Callable[[], ServerSettings],
                 admits: Callable[[str], bool] | None = None) -> None:
        self._app = app
        self._answers = answers
        self._settings = settings
        self._admits = admits
        self._stopping = asyncio.Event()
        self._open = 0
        self._idle = asyncio.Event()
        self._idle.set()

    async def end_requests(self, timeout: float) -> None:
        """End every open request and wait (at most timeout seconds) until they have."""
        self._stopping.set()
        try:
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        except TimeoutError:
            pass

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        self._open += 1
        self._idle.clear()
        try:
            await self._serve(scope, receive, send)
        finally:
            self._open -= 1
            if not self._open:
                self._idle.set()

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        outcome = Outcome()
        scope[OUTCOME_KEY] = outcome
        sent = {"status": 0, "started": False, "complete": False}

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                sent["status"], sent["started"] = message["status"], True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                sent["complete"] = True
            await send(message)

        try:
            refused = self._refusal(scope) if path != "/" and scope["method"] != "OPTIONS" else None
            if refused is not None:
                code = "invalid_api_key" if refused.status == 401 else None
                await error_response(flavor_of(path), refused.status, refused.message, code=code)(
                    scope, receive, sending)
                return
            await self._app(scope, self._receiver(receive), sending)
            if self._stopping.is_set() and not sent["complete"]:
                await self._finish(scope, receive, sending, bool(sent["started"]))
        finally:
            if path.startswith(("/v1/", "/api/")):
                self._log(scope, outcome, outcome.status or int(sent["status"]) or 500)

    def _refusal(self, scope: Scope) -> Refusal | None:
        if self._admits is None:
            return refusal(scope, self._settings())
        return None if self._admits(key_given(scope)) else Refusal(401, NOT_PAIRED)

    def _receiver(self, receive: Receive) -> Receive:
        """receive, which says the client has gone once stop() begins."""
        async def receiving() -> Message:
            if self._stopping.is_set():
                return _DISCONNECT
            got = asyncio.ensure_future(receive())
            stop = asyncio.ensure_future(self._stopping.wait())
            try:
                await asyncio.wait({got, stop}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stop.cancel()
                if not got.done():
                    got.cancel()
            return got.result() if got.done() and not got.cancelled() else _DISCONNECT

        return receiving

    async def _finish(self, scope: Scope, receive: Receive, send: Send, started: bool) -> None:
        """End a response stop() cut short: a stream just ends; a request still waiting gets 503."""
        if started:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        else:
            await error_response(flavor_of(scope["path"]), 503, TURNED_OFF)(scope, receive, send)

    def _log(self, scope: Scope, outcome: Outcome, status: int) -> None:
        peer = scope.get("client")
        client = f"{peer[0]}:{peer[1]}" if peer else "unknown"
        self._answers.log(RequestRecord(
            at=datetime.now().astimezone(), client=client, endpoint=scope["path"], model=outcome.model,
            prompt_tokens=outcome.prompt_tokens, completion_tokens=outcome.completion_tokens,
            tokens_per_s=outcome.tokens_per_s, status=status))
