"""What every endpoint does alike: read the body, name the client, turn refusals into error bodies."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from app.server.errors import BadRequest, Flavor, bad_request_response, refused_response
from app.server.fields import MAX_BODY_BYTES, Body, parse_json, too_large
from app.server.runs import CLIENT_GONE, ClientGone, outcome_of
from app.service.api.api_answers import ApiRefused

# The longest a body may pause between two of its pieces: one that stops arriving would hold
# its connection, and its file handle, for good.
BODY_PAUSE_S = 30.0


async def read_body(request: Request) -> Body:
    """The request's JSON object; BadRequest if it is too big, not JSON, not an object, or stops
    arriving; ClientGone if the client leaves while sending it."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise too_large(int(declared))
    raw = bytearray()
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(BODY_PAUSE_S) as pause:
            async for chunk in request.stream():
                raw += chunk
                if len(raw) > MAX_BODY_BYTES:
                    break
                pause.reschedule(loop.time() + BODY_PAUSE_S)
    except ClientDisconnect:
        outcome_of(request).status = CLIENT_GONE
        raise ClientGone() from None
    except TimeoutError:
        raise BadRequest(f"The request body stopped arriving: nothing came for {BODY_PAUSE_S:g} seconds after "
                         f"{len(raw):,} bytes. Send the whole body at once.", status=408) from None
    return parse_json(bytes(raw))


def client_of(request: Request) -> str:
    """The peer as "host:port", as the request log shows it."""
    peer = request.client
    return f"{peer.host}:{peer.port}" if peer is not None else "unknown"


async def guarded(flavor: Flavor, request: Request, work: Callable[[], Awaitable[Response]]) -> Response:
    """work's response, or the error response its refusal calls for."""
    try:
        return await work()
    except BadRequest as problem:
        response = bad_request_response(flavor, problem)
        if problem.status == 408:  # the rest of its body may still come: no next request can follow it
            response.headers["Connection"] = "close"
        return response
    except ApiRefused as refused:
        return refused_response(flavor, refused)
    except ClientGone:
        outcome_of(request).status = CLIENT_GONE
        return Response(status_code=CLIENT_GONE)  # never read: the client has gone
