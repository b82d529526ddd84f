"""The backend registry (app/engine/backends/registry.py): which backend takes a model, what each declares,
and that reading it loads no runtime in the window's process."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.backends import registry
from app.engine.backends.llama import BACKEND as LLAMA
from app.engine.backends.onnx import BACKEND as ONNX
from app.engine.backends.remote import BACKEND as REMOTE
from app.engine.backends.spec import ModelLocation
from app.engine.capabilities import Capability
from app.engine.failure_words import WINDOW, describe
from app.engine.failures import BadModelFile, NoBackend, Unsupported
from app.engine.protocol import AnswerShape
from app.service.models.client import EngineClient
from app.service.models.engine_errors import EngineError
from tests.helpers.engine import load_error

ROOT = Path(__file__).resolve().parents[2]
TINY_ONNX = ROOT / "tests" / "fixtures" / "tiny-onnx"


def test_a_gguf_file_goes_to_llama_cpp_and_an_onnx_folder_to_onnx_runtime(tiny_model: Path) -> None:
    # As the window asks, with the format the library recorded, and as the engine does, from the disk.
    assert registry.backend_for(ModelLocation("model.gguf", "gguf")) is LLAMA
    assert registry.backend_for(ModelLocation("a folder", "onnx")) is ONNX
    assert registry.backend_for(registry.located(str(tiny_model))[0]) is LLAMA
    assert registry.backend_for(registry.located(str(TINY_ONNX))[0]) is ONNX
    assert registry.backend_for(ModelLocation("https://example.com/v1")) is None


def test_a_path_that_holds_no_model_keeps_the_librarys_words(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a model", encoding="utf-8")
    location, problem = registry.located(str(notes))
    assert location == ModelLocation(str(notes)) and registry.backend_for(location) is None
    assert problem is not None and problem.kind == "unknown_format"
    assert registry.located("echo://Polly") == (ModelLocation("echo://Polly"), None)


def test_what_each_built_in_backend_declares() -> None:
    assert LLAMA.capabilities == {Capability.TOOLS, Capability.GRAMMARS, Capability.JSON_SCHEMAS, Capability.MIN_P,
                                  Capability.IMAGES}
    assert ONNX.capabilities == {Capability.TOOLS, Capability.JSON_SCHEMAS}
    assert REMOTE.capabilities == {Capability.TOOLS, Capability.JSON_SCHEMAS, Capability.MIN_P, Capability.IMAGES}
    assert [spec.name for spec in registry.registered()] == ["llama.cpp", "ONNX Runtime GenAI", "a server you added"]


def test_a_shape_part_a_backend_does_not_declare_is_refused_naming_those_that_do() -> None:
    refused = registry.unsupported(ONNX, AnswerShape(grammar='root ::= "yes"'), "phi-onnx")
    assert refused == Unsupported("phi-onnx", "ONNX Runtime GenAI", Capability.GRAMMARS, ("llama.cpp",))
    assert describe(refused, WINDOW) == ("phi-onnx runs on ONNX Runtime GenAI, which takes no grammars. Leave them "
                                         "out, or choose a model that runs on llama.cpp.")
    for shape in (AnswerShape(json_schema='{"type": "object"}'), AnswerShape(json_object=True),
                  AnswerShape(tools="[]", tool_choice="auto"), AnswerShape(tools="[]", tool_choice="none"),
                  AnswerShape()):
        assert registry.unsupported(ONNX, shape, "phi-onnx") is None
        assert registry.unsupported(LLAMA, shape, "tiny.gguf") is None
    assert registry.unsupported(LLAMA, AnswerShape(grammar='root ::= "yes"'), "tiny.gguf") is None


def test_a_package_named_for_registration_must_hold_a_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(registry.EXTRA_BACKENDS, "tests.engine")
    with pytest.raises(TypeError, match="tests.engine .* holds no BackendSpec"):
        registry.registered()


def test_the_window_the_cli_and_the_api_server_read_the_registry_without_loading_a_runtime() -> None:
    """llama.cpp and ONNX Runtime load native libraries: only the engine process may import them. The API
    server reads a response_format schema without converting it (the engine's backend does)."""
    script = (
        "import sys\n"
        "import app.__main__, app.ui.app, app.cli.chat, app.server.runner\n"
        "from app.server.fields import Body\n"
        "from app.server.openai_asks import response_format\n"
        "shape = response_format(Body({'response_format': {'type': 'json_schema', 'json_schema': {'schema': {\n"
        "    'type': 'object', 'properties': {'ok': {'type': 'boolean'}}}}}}))\n"
        "assert shape.json_schema and shape.grammar is None, shape\n"
        "from app.engine.backends.registry import backend_for, registered\n"
        "from app.engine.backends.spec import ModelLocation\n"
        "assert backend_for(ModelLocation('m.gguf', 'gguf')).name == 'llama.cpp' and len(registered()) == 3\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('llama_cpp', 'onnxruntime', 'onnxruntime_genai')))\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", result.stdout


def test_the_engine_refuses_an_address_no_backend_takes_and_a_file_that_is_no_model(tmp_path: Path) -> None:
    refused = load_error("nothing://here")
    assert refused.failure == NoBackend("nothing://here")
    assert "No backend in Kestrel loads nothing://here" in refused.message
    missing = load_error(tmp_path / "gone.gguf")
    assert isinstance(missing.failure, BadModelFile) and missing.failure.problem == "missing"


def test_the_engine_process_refuses_a_grammar_for_an_onnx_model_before_the_backend_sees_it() -> None:
    pytest.importorskip("onnxruntime_genai")

    async def scenario() -> EngineError:
        client = EngineClient()
        try:
            await client.load(str(TINY_ONNX), context_length=256)
            with pytest.raises(EngineError) as refused:
                async for _ in client.generate([], shape=AnswerShape(grammar='root ::= "yes"')):
                    pass
            return refused.value
        finally:
            await client.shutdown()

    refused = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert refused.failure == Unsupported("tiny-onnx", "ONNX Runtime GenAI", Capability.GRAMMARS, ("llama.cpp",))
