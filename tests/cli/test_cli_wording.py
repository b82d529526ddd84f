"""The engine words its advice for the window ("in the settings"); the CLI names its flags.

Issue 9, defect 10. The engine's messages travel to the CLI as text only, so the CLI
swaps known sentences for its own. These tests build each message the way the engine
does, so a reworded engine message that the CLI would no longer find fails here.
"""

from __future__ import annotations

from pathlib import Path

from app.cli.chat import in_cli_words
from app.engine.errors import ContextOverflow
from app.engine.onnx_backend import _load_failure_message
from app.engine.resources import memory_problem
from app.hardware.placement_types import ModelFacts
from app.library.model_format import read_onnx_folder

TINY_ONNX = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-onnx"


def test_too_little_memory_says_to_lower_ctx() -> None:
    facts = ModelFacts("gguf", file_size=8 << 30, context_length=32768, kv_cache_bytes=4 << 30)
    message = memory_problem("big.gguf", facts, available=1 << 30)
    assert message is not None

    worded = in_cli_words(message)

    assert "lower --ctx" in worded and "context length" not in worded


def test_a_device_that_cannot_run_the_model_says_to_use_device() -> None:
    info = read_onnx_folder(TINY_ONNX)
    message = _load_failure_message(info, "cuda", RuntimeError("CUDA execution provider is not enabled"))

    worded = in_cli_words(message)

    assert "--device" in worded and "settings" not in worded


def test_the_context_advice_is_one_sentence_the_cli_can_find() -> None:
    message = str(ContextOverflow(1523, 256))

    assert message == ("The prompt is 1,523 tokens but the context holds 256. "
                       + ContextOverflow.ADVICE)
