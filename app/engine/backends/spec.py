"""What a backend declares when it registers: what it loads, what it supports, and how the engine opens it.

A spec is plain data the UI process may read too (app/service asks which backend takes a model,
and what that backend can do), so importing one loads no runtime: `open` imports its backend's
heavy modules (llama.cpp, ONNX Runtime GenAI) when the engine process calls it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from app.engine.capabilities import Capability

if TYPE_CHECKING:
    from app.engine.backends.backend import Backend
    from app.engine.protocol import Load
    from app.hardware.report import HardwareReport


# "echo://…", "https://…": an address, not a path (a Windows drive letter is one letter).
_ADDRESS = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")


@dataclass(frozen=True)
class ModelLocation:
    """Where a model is, as backends judge it: a path with the format found there, or an address.

    text: the path or the address as given. format: the library's name for what the path holds
    ("gguf", "onnx"), or None when it holds no model the library knows, or text is an address.
    The UI process fills it from the library's record (no disk); the engine reads the disk.
    """

    text: str
    format: str | None = None

    @property
    def is_address(self) -> bool:
        return _ADDRESS.match(self.text) is not None


# The engine process's end of a backend: load the request's model on this machine, or raise
# ModelLoadError / ModelFileError with what the user can do.
Opener = Callable[["Load", "HardwareReport"], "Backend"]


@dataclass(frozen=True)
class BackendSpec:
    """One registered backend.

    name: what the user reads ("llama.cpp"). takes: whether it loads the model at a location (the
    first registered backend that takes one loads it). capabilities: what its answers can be asked
    for; the engine refuses the rest before the backend sees them. open: makes the backend in the
    engine process; the grammars it follows are built inside it, by the backend that uses them.
    """

    name: str
    takes: Callable[[ModelLocation], bool]
    capabilities: frozenset[Capability]
    open: Opener

    def can(self, capability: Capability) -> bool:
        return capability in self.capabilities
