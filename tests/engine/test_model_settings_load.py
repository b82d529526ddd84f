"""A model's own settings reach the engine's load: its chat template and its GPU layers."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.backends.backend import DeviceChoice
from app.engine.templates.chat_format import template_in_use
from app.engine.errors import ModelLoadError
from app.engine.failures import BadTemplate
from app.engine.backends.llama.gguf_backend import GgufBackend
from app.engine.backends.loading import with_gpu_layers
from app.engine.backends.onnx.onnx_backend import OnnxBackend
from app.engine.protocol import ChatMessage, Load
from app.hardware.placement import ALL_LAYERS, Placement, Runtime
from tests.helpers.tiny_gguf import build_tiny_gguf

TINY_ONNX = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-onnx"
OVERRIDE = ("{% for m in messages %}[{{ m['role'] | upper }}] {{ m['content'] }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}[ASSISTANT] {% endif %}")
TALK = (ChatMessage("user", "Hi"),)
GPU = Placement(kind="gpu", device_name="Radeon 780M", backend=Runtime.LLAMA_CPP, memory_needed=1 << 30,
                reason="GPU: fits whole", gpu_layers=ALL_LAYERS)
CPU = Placement(kind="cpu", device_name="Ryzen 7", backend=Runtime.LLAMA_CPP, memory_needed=1 << 30,
                reason="CPU: the fall-back")


def test_no_override_keeps_the_files_template_or_the_built_in_format() -> None:
    assert template_in_use("{{ x }}", None) == ("{{ x }}", "embedded")
    assert template_in_use(None, None) == (None, "builtin")


def test_a_template_override_replaces_the_files_template(tiny_model: Path) -> None:
    backend = GgufBackend.load(Load(1, str(tiny_model), context_length=256, chat_template=OVERRIDE),
                               DeviceChoice("cpu", "test"))
    try:
        assert backend.loaded.chat_format == "override"
        assert backend._spec(TALK).text == "[USER] Hi<|im_end|>\n[ASSISTANT] "
        # The stops still come from the model's end tokens and the template's turn marker.
        assert "<|im_end|>" in backend._spec(TALK).stop
    finally:
        backend.close()


def test_an_override_gives_a_file_without_a_template_one(tmp_path: Path) -> None:
    plain = build_tiny_gguf(tmp_path / "no template.gguf", chat_template=None)
    backend = GgufBackend.load(Load(1, str(plain), context_length=256, chat_template=OVERRIDE),
                               DeviceChoice("cpu", "test"))
    try:
        assert backend._spec(TALK).chat_format == "embedded"
        assert backend._spec(TALK).text.startswith("[USER] Hi")
    finally:
        backend.close()


def test_an_onnx_model_takes_the_override_too() -> None:
    backend = OnnxBackend.load(Load(1, str(TINY_ONNX), context_length=256, chat_template=OVERRIDE),
                               DeviceChoice("cpu", "test"))
    try:
        assert backend.loaded.chat_format == "override"
        assert backend._spec(TALK).text == "[USER] Hi<|im_end|>\n[ASSISTANT] "
    finally:
        backend.close()


def test_an_override_that_does_not_compile_is_refused_at_load_with_what_to_do(tiny_model: Path) -> None:
    with pytest.raises(ModelLoadError) as refused:
        GgufBackend.load(Load(1, str(tiny_model), context_length=256, chat_template="{% for m in messages %}"),
                         DeviceChoice("cpu", "test"))
    assert isinstance(refused.value.failure, BadTemplate)
    assert "model's settings" in refused.value.message and "line 1" in refused.value.message
    assert "clear it" in refused.value.message


def test_zero_gpu_layers_keeps_only_the_cpu_and_says_why() -> None:
    [only] = with_gpu_layers((GPU, CPU), 0)
    assert only.kind == "cpu"
    assert only.reason.endswith("the model's settings put no layers on the GPU")


def test_a_layer_count_replaces_what_placement_worked_out_for_each_gpu() -> None:
    gpu, cpu = with_gpu_layers((GPU, CPU), 12)
    assert gpu.gpu_layers == 12 and "12 layers on the GPU, as the model's settings say" in gpu.reason
    assert cpu == CPU
    assert with_gpu_layers((GPU, CPU), ALL_LAYERS)[0].reason.endswith("all layers on the GPU, as the model's settings say")


def test_gpu_layers_on_a_cpu_only_machine_leave_the_cpu_as_it_was() -> None:
    assert with_gpu_layers((CPU,), 20) == (CPU,)
