"""The sharing server (Kestrel Link): a second ApiServer with TLS, for paired devices only.

The same endpoints as the API server, on this PC's network address (or the one the person set) and
its own port, with TLS and this PC's certificate, admitting only paired devices' keys (never the API
server's key, never key-less, no CORS), plus POST /link/pair. With sharing off it is not built:
nothing listens beyond this PC for it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from starlette.types import ASGIApp

from app.core.server_settings import ServerSettings
from app.server.gate import Gate
from app.server.http_app import build_app
from app.server.link.files import LinkFiles, lan_address
from app.server.link.pair_route import with_pairing
from app.server.runner import ApiServer, TlsFiles
from app.service.api.api_answers import ApiAnswers

SHARED_WORDS = "other computers on the network can reach your models over TLS, paired devices only."


def shared_settings(saved: ServerSettings, host: str) -> ServerSettings:
    """What the sharing server runs with: the API server's settings on host and the share port, with
    neither key-less mode nor CORS (a paired device's key is the only way in)."""
    return dataclasses.replace(saved, host=host, port=saved.share_port, listen_beyond_this_pc=True,
                               keyless_loopback=False, cors_origins=())


def sharing_server(files: LinkFiles, answers: ApiAnswers, settings: Callable[[], ServerSettings], *,
                   on_change: Callable[[], None] = lambda: None) -> ApiServer:
    """The sharing server, not started, on settings' share_host (or this PC's network address); its
    certificate is made first if there is none (OSError when the folder refuses it)."""
    certificate = files.certificate()
    host = settings().share_host or lan_address()

    def build(answers: ApiAnswers, current: Callable[[], ServerSettings]) -> tuple[ASGIApp, Gate]:
        app, gate = build_app(answers, current, files.devices.admits)
        return with_pairing(app, files.codes, files.devices, certificate.fingerprint), gate

    return ApiServer(answers, lambda: shared_settings(settings(), host), on_change=on_change, build=build,
                     tls=TlsFiles(certificate.certificate, certificate.private_key), beyond_words=SHARED_WORDS)
