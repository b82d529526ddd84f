"""ONNX model folders through ONNX Runtime GenAI.

BACKEND is its registration (app/engine/backends/registry.py); importing this package loads no
native library: ONNX Runtime GenAI is imported when the engine opens a model.
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
    return location.format == "onnx"


def _open(request: Load, report: HardwareReport) -> Backend:
    from app.engine.backends.onnx.opening import open_onnx  # loads ONNX Runtime GenAI: in the engine only

    return open_onnx(request, report)


# No GBNF grammars: GenAI's guidance holds an answer to a JSON schema only. No images yet. No min-p:
# its search options have none (set_search_options(min_p=...) is "Unknown value" in 0.18).
BACKEND = BackendSpec("ONNX Runtime GenAI", _takes, frozenset({Capability.TOOLS, Capability.JSON_SCHEMAS}), _open)
