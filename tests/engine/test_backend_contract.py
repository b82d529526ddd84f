"""Both backends keep the one Backend contract, and report the device loading chose for them."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.generation import GenerationSettings
from app.engine.backends.backend import Backend, DeviceChoice
from app.engine.control import GenerationControl
from app.engine.protocol import ChatMessage, Done, Generate, Load

TINY_ONNX = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-onnx"
CHOICE = DeviceChoice("CPU", "CPU: chosen in settings", ("Radeon: out of memory",))


def _answer_device(backend: Backend) -> str:
    control = GenerationControl()
    control.begin(2)
    request = Generate(2, (ChatMessage("user", "Hello"),), GenerationSettings(max_tokens=3, seed=1))
    *_, done = backend.generate(request, control)
    assert isinstance(done, Done)
    return done.stats.device


def _check(backend: Backend) -> None:
    try:
        assert isinstance(backend, Backend)
        loaded = backend.loaded
        assert (loaded.device, loaded.placement_reason, loaded.fallback_reasons) == (
            CHOICE.device, CHOICE.reason, CHOICE.fallback_reasons)
        assert _answer_device(backend) == CHOICE.device
        backend.reset()
        assert _answer_device(backend) == CHOICE.device
    finally:
        backend.close()


def test_the_gguf_backend_keeps_the_contract(tiny_model: Path) -> None:
    from app.engine.backends.llama.gguf_backend import GgufBackend

    _check(GgufBackend.load(Load(1, str(tiny_model), context_length=256, threads=1), CHOICE))


def test_the_onnx_backend_keeps_the_contract() -> None:
    pytest.importorskip("onnxruntime_genai")
    from app.engine.backends.onnx.onnx_backend import OnnxBackend

    _check(OnnxBackend.load(Load(1, str(TINY_ONNX), context_length=256, threads=1), CHOICE))
