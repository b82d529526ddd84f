"""The registered backends, in order of preference, and which one takes a model.

Each backend is a subpackage whose `__init__` holds its BackendSpec as BACKEND (data only: no
runtime is imported). The built-in ones are listed below; a backend that lives outside app (the
test backend, tests/engine/echo_backend/) is registered by naming its package in the environment
variable EXTRA_BACKENDS, which the engine process inherits, so both processes see the same list.
Both ask the same question of it: the UI process with the format the library recorded, the
engine with what it finds on the disk.
"""

from __future__ import annotations

import importlib
import os

from app.core.generation import GenerationSettings
from app.engine.backends.llama import BACKEND as LLAMA
from app.engine.backends.onnx import BACKEND as ONNX
from app.engine.backends.remote import BACKEND as REMOTE
from app.engine.backends.spec import BackendSpec, ModelLocation
from app.engine.capabilities import Capability
from app.engine.failures import Unsupported
from app.engine.protocol import AnswerShape
from app.library.model_files.gguf_info import ModelFileError
from app.library.model_files.model_format import detect_format

BUILT_IN: tuple[BackendSpec, ...] = (LLAMA, ONNX, REMOTE)
# Comma-separated packages, each with a BACKEND spec, registered after the built-in ones.
EXTRA_BACKENDS = "KESTREL_ENGINE_BACKENDS"


def registered() -> tuple[BackendSpec, ...]:
    """Every backend, the built-in ones first (read each time: a test may name another)."""
    names = [name.strip() for name in os.environ.get(EXTRA_BACKENDS, "").split(",") if name.strip()]
    extra = []
    for name in names:
        spec = getattr(importlib.import_module(name), "BACKEND", None)
        if not isinstance(spec, BackendSpec):
            raise TypeError(f"{name} (named in {EXTRA_BACKENDS}) holds no BackendSpec called BACKEND")
        extra.append(spec)
    return BUILT_IN + tuple(extra)


def backend_for(location: ModelLocation) -> BackendSpec | None:
    """The first registered backend that takes the model there, or None when none does."""
    return next((spec for spec in registered() if spec.takes(location)), None)


def located(text: str) -> tuple[ModelLocation, ModelFileError | None]:
    """A location as the engine finds it: an address as it is; a path with the format on the disk,
    or with none and the library's words for why it holds no model it knows (the words shown when
    no backend takes it either). Reads the disk: never on the UI thread."""
    location = ModelLocation(text)
    if location.is_address:
        return location, None
    try:
        return ModelLocation(text, detect_format(text)), None
    except ModelFileError as problem:  # ModelFolderError too
        return location, problem


def unsupported(spec: BackendSpec, shape: AnswerShape, name: str,
                settings: GenerationSettings | None = None) -> Unsupported | None:
    """What this answer's shape and sampling ask that the backend does not declare (the first), naming
    the registered backends that do; None when it can have all of it. The engine asks before the backend
    sees the request, so a backend never reads a part of a shape, or a setting, it has not registered for."""
    asked = ((Capability.TOOLS, shape.uses_tools), (Capability.GRAMMARS, shape.grammar is not None),
             (Capability.JSON_SCHEMAS, shape.json_schema is not None or shape.json_object),
             (Capability.MIN_P, settings is not None and settings.min_p > 0))
    for capability, wanted in asked:
        if wanted and not spec.can(capability):
            others = tuple(other.name for other in registered() if other.can(capability))
            return Unsupported(name, spec.name, capability, others)
    return None
