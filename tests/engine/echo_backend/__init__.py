"""A backend that lives only in tests: it repeats the last user message, spoken by whoever its location names.

It shows what adding a backend takes: this one subpackage (its registration, BACKEND, and its
backend, backend.py) and one registration: naming this package in KESTREL_ENGINE_BACKENDS
(app/engine/backends/registry.py), which the engine process inherits. It loads what no built-in
backend does, a model that is not a file Kestrel knows: an address ("echo://Polly") or a `.echo`
file holding the speaker's name. It declares no capability, so the engine refuses tools, grammars
and schemas for it before it sees them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.engine.backends.spec import BackendSpec, ModelLocation

if TYPE_CHECKING:
    from app.engine.backends.backend import Backend
    from app.engine.protocol import Load
    from app.hardware.report import HardwareReport

SCHEME = "echo://"
SUFFIX = ".echo"


def _takes(location: ModelLocation) -> bool:
    return location.text.startswith(SCHEME) or (location.format is None and location.text.endswith(SUFFIX))


def _open(request: Load, report: HardwareReport) -> Backend:
    from tests.engine.echo_backend.backend import EchoBackend

    return EchoBackend.open(request)


BACKEND = BackendSpec("Echo", _takes, frozenset(), _open)
