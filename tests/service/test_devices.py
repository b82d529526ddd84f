"""Where the engine runs a model: placement, fall-back with reasons, ONNX models, the report."""

from __future__ import annotations

import asyncio
import functools
import shutil
from pathlib import Path

import pytest

from app.core.generation import GenerationSettings
from app.engine.failures import BadModelFile
from app.engine.protocol import ChatMessage, Done
from app.service.models.client import EngineClient
from app.service.models.engine_errors import EngineError
from tests.hardware.machines import recorded_report
from tests.helpers.engine import answer_parts, load_error

ONNX_MODEL = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-onnx"
HELLO = (ChatMessage("user", "Hello there"),)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, timeout=120))


def machine(name: str):
    return functools.partial(recorded_report, name)


async def _answer(client: EngineClient, settings: GenerationSettings) -> tuple[list[str], Done]:
    return await answer_parts(client, HELLO, settings)


def test_this_machine_runs_gguf_on_the_cpu_and_says_why(tiny_model: Path) -> None:
    async def scenario():
        client = EngineClient()
        try:
            loaded = await client.load(str(tiny_model), context_length=512)
            report = await client.hardware_report()
        finally:
            await client.shutdown()
        return loaded, report

    loaded, report = run(scenario())
    assert loaded.device == "CPU" and loaded.fallback_reasons == ()
    assert loaded.placement_reason.startswith("CPU: ")
    assert report.cpu is not None and report.cpu.cores >= 1
    assert report.llama is not None and report.llama.gpu_offload is False


def test_a_gpu_the_engine_cannot_use_falls_back_to_the_cpu_with_the_reason(tiny_model: Path) -> None:
    # The recorded desktop has an RTX 4070 and a CUDA build; this machine's llama.cpp
    # has no GPU backend, so the GPU placement must fail loudly, not run on the CPU.
    async def scenario():
        client = EngineClient(hardware=machine("windows_desktop_rtx4070"))
        try:
            loaded = await client.load(str(tiny_model), context_length=512)
            _, done = await _answer(client, GenerationSettings(max_tokens=4))
        finally:
            await client.shutdown()
        return loaded, done

    loaded, done = run(scenario())
    assert loaded.device == "CPU"
    assert len(loaded.fallback_reasons) == 1
    assert loaded.fallback_reasons[0].startswith("NVIDIA GeForce RTX 4070: ")
    assert "built without GPU support" in loaded.fallback_reasons[0]
    assert done.stats.device == "CPU"


def test_forcing_a_gpu_the_machine_lacks_is_refused_not_run_elsewhere(tiny_model: Path) -> None:
    async def scenario():
        client = EngineClient(hardware=machine("linux_vm"))
        try:
            with pytest.raises(EngineError) as refused:
                await client.load(str(tiny_model), context_length=512, device="gpu")
            loaded = await client.load(str(tiny_model), context_length=512, device="cpu")
        finally:
            await client.shutdown()
        return refused.value, loaded

    refused, loaded = run(scenario())
    assert refused.kind == "placement_refused"
    assert "GPU" in refused.message
    assert loaded.device == "CPU"


def test_onnx_model_streams_through_the_engine_and_cancels() -> None:
    async def scenario():
        client = EngineClient()
        try:
            loaded = await client.load(str(ONNX_MODEL), context_length=512)
            parts, done = await _answer(client, GenerationSettings(max_tokens=20, temperature=0.0))
            # This model makes ~6,000 tokens/s: hold it between two tokens, then cancel.
            client.pause()
            answer = asyncio.create_task(_answer(client, GenerationSettings(max_tokens=100000)))
            await asyncio.sleep(0.5)
            client.cancel()
            _, cancelled = await answer
        finally:
            await client.shutdown()
        return loaded, parts, done, cancelled

    loaded, parts, done, cancelled = run(scenario())
    assert loaded.device == "CPU (ONNX Runtime)" and loaded.architecture == "llama"
    assert len(parts) >= 2 and done.stats.tokens == 20 and done.finish_reason == "length"
    assert done.stats.device == loaded.device and done.stats.prompt_tokens_evaluated == done.stats.prompt_tokens > 0
    assert cancelled.finish_reason == "cancelled" and 1 <= cancelled.stats.tokens <= 2


@pytest.mark.parametrize("damage, problem", [
    (lambda folder: (folder / "genai_config.json").unlink(), "no_config"),
    (lambda folder: (folder / "genai_config.json").write_text("{ not json"), "bad_config"),
    (lambda folder: (folder / "model.onnx").unlink(), "no_weights"),
])
def test_broken_onnx_folders_are_refused_clearly(tmp_path: Path, damage, problem) -> None:
    folder = tmp_path / "broken onnx model"
    shutil.copytree(ONNX_MODEL, folder)
    damage(folder)

    error = load_error(folder)
    assert error.kind == "model_file"
    assert isinstance(error.failure, BadModelFile) and error.failure.problem == problem
    assert "broken onnx model" in error.message
