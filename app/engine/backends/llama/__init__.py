"""GGUF models through llama.cpp (llama-cpp-python): the backend, its prompt tokens, images, saved states and grammars.

BACKEND is its registration (app/engine/backends/registry.py); importing this package loads no
native library: llama.cpp is imported when the engine opens a model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.engine.backends.spec import BackendSpec, ModelLocation
from app.engine.capabilities import Capability

if TYPE_CHECKING:
    from app.engine.backends.backend import Backend
    from app.engine.protocol import Load
    from app.hardware.report import HardwareReport


def _takes(location: ModelLocation) -> bool:
    return location.format == "gguf"


def _open(request: Load, report: HardwareReport) -> Backend:
    from app.engine.backends.llama.opening import open_gguf  # loads llama.cpp: in the engine only

    return open_gguf(request, report)


BACKEND = BackendSpec("llama.cpp", _takes, frozenset({Capability.TOOLS, Capability.GRAMMARS, Capability.JSON_SCHEMAS,
                                                      Capability.MIN_P, Capability.IMAGES}), _open)
