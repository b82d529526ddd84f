"""POST /link/pair: a device sends the pairing code shown on this PC and gets its own key, once."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from app.library.servers.link_pairing import PAIR_PATH
from app.server.endpoint import read_body
from app.server.errors import BadRequest
from app.server.link.devices import PairedDevices
from app.server.link.pairing_codes import CODE_LIFETIME_S, WRONG_WINDOW_S, PairingCodes, Redeemed
from app.server.runs import CLIENT_GONE, ClientGone

# A pairing request is a code and a name: anyone on the network may send one, so nothing bigger is read.
MAX_PAIR_BYTES = 4096
REFUSALS = {
    Redeemed.WRONG: (403, "That pairing code is wrong. Type the code shown on the sharing PC again, letter by letter."),
    Redeemed.EXPIRED: (410, f"That pairing code has expired (a code lasts {CODE_LIFETIME_S // 60} minutes). Make a "
                            "new one on the sharing PC, then type it here."),
    Redeemed.NONE_WAITING: (409, "The sharing PC has no pairing code waiting: a code is used once, then is gone. Make "
                                 "a new one on the sharing PC, then type it here."),
    Redeemed.TOO_MANY: (429, f"Too many wrong pairing codes were tried in the last minute, so this one was not even "
                             f"looked at. Wait {WRONG_WINDOW_S:.0f} seconds, then type the code again."),
}


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": {"message": message, "type": "pairing_refused"}}, status_code=status)


def with_pairing(inner: ASGIApp, codes: PairingCodes, devices: PairedDevices, fingerprint: str) -> ASGIApp:
    """inner, with POST /link/pair answered in front of its gate (pairing needs no key: it gives one)."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == PAIR_PATH:
            response = await _pair(Request(scope, receive), codes, devices, fingerprint)
            await response(scope, receive, send)
        else:
            await inner(scope, receive, send)

    return app


async def _pair(request: Request, codes: PairingCodes, devices: PairedDevices, fingerprint: str) -> Response:
    if request.method != "POST":
        return _error(405, "Pairing takes POST with the code, as Kestrel sends it.")
    declared = request.headers.get("content-length", "")
    if not declared.isdigit() or int(declared) > MAX_PAIR_BYTES:
        return _error(413, f"A pairing request is a code and a device's name, at most {MAX_PAIR_BYTES:,} bytes "
                           "with its length said (Content-Length).")
    try:
        body = await read_body(request)
        code, device = body.text("code", required=True), body.text("device") or ""
    except BadRequest as problem:
        return _error(problem.status, str(problem))
    except ClientGone:
        return Response(status_code=CLIENT_GONE)
    assert code is not None  # required
    # Files, under a lock: off the loop, which may be the window's.
    redeemed = await asyncio.to_thread(codes.redeem, code, fingerprint)
    if redeemed is not Redeemed.TAKEN:
        status, words = REFUSALS[redeemed]
        return _error(status, words)
    paired, key = await asyncio.to_thread(devices.add, device)
    return JSONResponse({"key": key, "device": paired.name, "fingerprint": fingerprint})


