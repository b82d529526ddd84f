"""The engine's failures cross as facts; the window names its settings, the CLI its flags.

Issue 9, defect 10, and issue 22: each test builds the facts the way the engine does,
then checks both front ends' words, so neither can drift from the other unnoticed.
"""

from __future__ import annotations

from pathlib import Path

from app.cli.failure_words import cli_words
from app.engine.errors import ContextOverflow
from app.engine.failure_words import WINDOW, describe
from app.engine.failures import FailedOn, NoDeviceWorked
from app.engine.backends.onnx.onnx_backend import _refused
from app.engine.backends.resources import memory_problem
from app.hardware.placement_types import ModelFacts
from app.library.model_files.model_format import read_onnx_folder
from app.service.models.engine_errors import EngineError

TINY_ONNX = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-onnx"


def test_too_little_memory_says_to_lower_ctx() -> None:
    facts = ModelFacts("gguf", file_size=8 << 30, context_length=32768, kv_cache_bytes=4 << 30)
    failure = memory_problem("big.gguf", facts, available=1 << 30)
    assert failure is not None

    window, cli = describe(failure, WINDOW), cli_words(failure)

    assert "Close other programs, lower the context length, or choose a smaller model." in window
    assert cli == window.replace("lower the context length", "lower --ctx")
    assert "context length" not in cli


def test_a_device_that_cannot_run_the_model_says_to_use_device() -> None:
    info = read_onnx_folder(TINY_ONNX)
    failure = _refused(info, "cuda", RuntimeError("CUDA execution provider is not enabled"))

    window, cli = describe(failure, WINDOW), cli_words(failure)

    assert window.endswith("This computer or this Kestrel cannot run models on NVIDIA GPU (CUDA); "
                           "choose another device in the settings, or CPU.")
    assert cli.endswith("This computer or this Kestrel cannot run models on NVIDIA GPU (CUDA); "
                        "choose another with --device (--device cpu always works).")
    assert "settings" not in cli


def test_every_device_tried_is_worded_with_the_flags() -> None:
    info = read_onnx_folder(TINY_ONNX)
    gpu = _refused(info, "dml", RuntimeError("DirectML is not enabled"))
    facts = ModelFacts("onnx", file_size=8 << 30, context_length=32768, kv_cache_bytes=4 << 30)
    cpu = memory_problem(info.path.name, facts, available=1 << 30)
    assert cpu is not None
    failure = NoDeviceWorked((FailedOn("Radeon", gpu), FailedOn("Ryzen", cpu)))

    cli = cli_words(failure)

    assert cli.startswith("The model could not be loaded on any device. Radeon: ")
    assert " Ryzen: " in cli and "--device" in cli and "lower --ctx" in cli and "settings" not in cli


def test_a_prompt_longer_than_the_context_in_each_front_ends_words() -> None:
    overflow = ContextOverflow(1523, 256)

    assert str(overflow) == ("The prompt is 1,523 tokens but the context holds 256. "
                             "Shorten the message or raise the context length in the settings.")
    assert EngineError(overflow.failure).message == str(overflow)
    assert cli_words(overflow.failure, 256, 256) == (
        "The prompt is 1,523 tokens but the context holds 256. "
        "Shorten the message, or give it a longer context with --ctx (it was 256 tokens).")
    assert cli_words(overflow.failure, 4096, 256) == (
        "The prompt is 1,523 tokens but the context holds 256. "
        "Shorten the message: 256 tokens is the most this model holds, so a larger --ctx does not help.")
