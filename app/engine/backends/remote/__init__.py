"""Models on servers the person added (OpenAI-compatible, Anthropic-compatible, Ollama, another Kestrel): the backend that streams their answers.

BACKEND is its registration (app/engine/backends/registry.py): it takes remote:// addresses, which
the library makes for a server's models (app/library/servers/records.py). Importing this package
opens no connection; the backend is made when the engine loads such a model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.engine.backends.spec import BackendSpec, ModelLocation
from app.engine.capabilities import Capability
from app.library.servers.records import SCHEME

if TYPE_CHECKING:
    from app.engine.backends.backend import Backend
    from app.engine.protocol import Load
    from app.hardware.report import HardwareReport


def _takes(location: ModelLocation) -> bool:
    return location.text.startswith(SCHEME)


def _open(request: Load, report: HardwareReport) -> Backend:
    from app.engine.backends.remote.remote_backend import RemoteBackend

    return RemoteBackend.open(request)


# Tools and JSON schemas go to the server in its API's own fields (tools, response_format / format); a
# GBNF grammar has no such field. min_p goes as Ollama's option and as the extension llama.cpp's and LM
# Studio's servers take. Whether one model takes tools is the server's to say: one that
# does not answers with its own refusal, worded as the server's. Images go in each API's own shape, to a
# model its server (or the person) says takes them: the backend refuses them for any other (NoVision).
BACKEND = BackendSpec("a server you added", _takes,
                      frozenset({Capability.TOOLS, Capability.JSON_SCHEMAS, Capability.MIN_P, Capability.IMAGES}),
                      _open)
