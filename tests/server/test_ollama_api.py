"""Kestrel's Ollama API end to end: the official `ollama` client over real sockets on 127.0.0.1, the real
service core, the scripted engine (or real llama.cpp on the tiny model), and raw HTTP for the error shapes."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import jsonschema
import numpy as np
import ollama
import pytest

from app.core.server_settings import ServerSettings
from app.core.paths import data_paths
from app.engine import protocol as p
from app.library.importer import import_model_file
from app.library.models import ModelLibrary
from app.service.models.client import EngineClient
from tests.helpers.embedding_gguf import build_embedding_gguf
from tests.helpers.scripted_answers import Script
from tests.helpers.scripted_engine import ScriptedEngine
from tests.helpers.tiny_gguf import build_tiny_gguf
from tests.helpers.tool_call_gguf import QWEN3_TEMPLATE
from tests.server.helpers import KEY, api_over, loop_thread, real_service, until

HELLO = [{"role": "user", "content": "Hello"}]
AUTH = {"Authorization": f"Bearer {KEY}"}
WEATHER = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                             "parameters": {"type": "object",
                                                            "properties": {"city": {"type": "string"}},
                                                            "required": ["city"]}}}]
TIMINGS = ("total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count",
           "eval_duration")
# The smallest PNG (one transparent pixel): the ollama client sends images as base64.
PIXEL = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")


# The clients a test made, closed after it (an open one is a ResourceWarning).
_OPEN: list[ollama.Client] = []


@pytest.fixture(autouse=True)
def close_clients() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def client_of(address: str, key: str | None = KEY) -> ollama.Client:
    headers = {"Authorization": f"Bearer {key}"} if key is not None else None
    client = ollama.Client(host=address, headers=headers, timeout=60)
    _OPEN.append(client)
    return client


def test_list_show_version_and_ps_describe_the_installed_model(tiny_model: Path) -> None:
    with loop_thread() as thread, real_service(thread, tiny_model, ScriptedEngine()) as service, \
            api_over(thread, service) as server:
        client = client_of(server.address)
        model = service.session.model
        assert model is not None
        listed = client.list().models
        assert [m.model for m in listed] == [model.id]
        entry = listed[0]
        assert entry.size == model.size and entry.modified_at is not None and entry.details is not None
        assert entry.digest == (model.sha256 or "")
        assert entry.details.format == "gguf" and entry.details.family == "llama"
        assert entry.details.parameter_size and entry.details.parameter_size[-1] in "MB"
        assert entry.details.quantization_level  # the tiny GGUF states its file type
        shown = client.show(f"{model.id}:latest")  # Ollama's default tag is taken off
        assert shown.details is not None and shown.details.family == "llama"
        assert shown.modelinfo is not None and shown.modelinfo["general.architecture"] == "llama"
        assert shown.capabilities is not None and shown.capabilities[0] == "completion"
        assert shown.modelfile is not None and f"FROM {model.id}" in shown.modelfile
        assert shown.parameters is not None and "temperature" in shown.parameters
        running = client.ps().models
        assert [m.model for m in running] == [model.id]
        version = httpx.get(f"{server.address}/api/version", headers=AUTH, timeout=10).json()
        assert version["version"].count(".") == 2


def test_chat_streamed_and_whole_with_options_and_timings(tiny_model: Path) -> None:
    engine = ScriptedEngine()
    engine.default_script = Script(text=("Kestrels", " hover", " here", "."), endless=False)
    with loop_thread() as thread, real_service(thread, tiny_model, engine) as service, \
            api_over(thread, service) as server:
        client = client_of(server.address)
        model = service.session.model
        assert model is not None
        whole = client.chat(model=model.id, messages=HELLO, stream=False,
                            options={"temperature": 0.2, "top_p": 0.5, "top_k": 7, "seed": 11, "num_predict": 30,
                                     "repeat_penalty": 1.3, "stop": ["###"]}, keep_alive="5m")
        assert whole.message.role == "assistant" and whole.message.content == "Kestrels hover here."
        assert whole.done and whole.done_reason == "stop" and whole.model == model.id
        assert whole.eval_count == 4 and (whole.prompt_eval_count or 0) > 0
        assert all(isinstance(whole[name], int) for name in TIMINGS) and (whole.total_duration or 0) > 0
        generate = engine.requests[-1]
        assert isinstance(generate, p.Generate) and generate.stop == ("###",)
        settings = generate.settings
        assert (settings.temperature, settings.top_p, settings.top_k, settings.seed, settings.max_tokens,
                settings.repeat_penalty) == (0.2, 0.5, 7, 11, 30, 1.3)
        parts = list(client.chat(model=model.id, messages=HELLO, stream=True))
        assert "".join(part.message.content or "" for part in parts) == "Kestrels hover here."
        assert [part.done for part in parts] == [False] * (len(parts) - 1) + [True]
        assert parts[-1].done_reason == "stop" and parts[-1].eval_count == 4
        # Without "stream" the answer streams, Ollama's default (the client always says which it wants).
        raw = httpx.post(f"{server.address}/api/chat", json={"model": f"{model.id}:latest", "messages": HELLO},
                         headers=AUTH, timeout=30)
        assert raw.headers["content-type"] == "application/x-ndjson"
        lines = [json.loads(text) for text in raw.text.splitlines()]
        assert len(lines) == 5 and lines[0]["message"] == {"role": "assistant", "content": "Kestrels"}
        assert lines[-1]["done"] is True and all(isinstance(lines[-1][name], int) for name in TIMINGS)
        short = client.chat(model=model.id, messages=HELLO, options={"num_predict": 2}, stream=False)
        assert short.message.content == "Kestrels hover" and short.done_reason == "length"
        assert short.eval_count == 2


def test_generate_whole_streamed_and_raw(tiny_model: Path) -> None:
    engine = ScriptedEngine()
    engine.default_script = Script(text=("Once", " upon"), endless=False)
    with loop_thread() as thread, real_service(thread, tiny_model, engine) as service, \
            api_over(thread, service) as server:
        client = client_of(server.address)
        model = service.session.model
        assert model is not None
        whole = client.generate(model=model.id, prompt="Tell a story", system="Be brief.")
        assert whole.response == "Once upon" and whole.done and whole.done_reason == "stop"
        generate = engine.requests[-1]
        assert isinstance(generate, p.Generate) and [(m.role.value, m.content) for m in generate.messages] == [
            ("system", "Be brief."), ("user", "Tell a story")]
        streamed = list(client.generate(model=model.id, prompt="Tell a story", stream=True))
        assert "".join(part.response or "" for part in streamed) == "Once upon" and streamed[-1].done
        client.generate(model=model.id, prompt="<s>raw text", raw=True)
        generate = engine.requests[-1]
        assert isinstance(generate, p.Generate) and generate.shape.prompt == "<s>raw text"
        loaded = client.generate(model=model.id)  # no prompt: Ollama's way to load a model
        assert loaded.done_reason == "load" and loaded.response == ""


def test_tools_format_and_images_reach_the_engine(tmp_path: Path) -> None:
    """Scripted calls on a model whose (Qwen3) template takes tools."""
    qwen = build_tiny_gguf(tmp_path / "qwen.gguf", chat_template=QWEN3_TEMPLATE.read_text(encoding="utf-8"))
    engine = ScriptedEngine()
    with loop_thread() as thread, real_service(thread, qwen, engine) as service, \
            api_over(thread, service) as server:
        client = client_of(server.address)
        model = service.session.model
        assert model is not None
        for stream in (False, True):
            engine.scripts.append(Script(text=(), calls=(("get_weather", '{"city":"Paris"}'),), endless=False))
            if stream:
                calls = [call for part in client.chat(model=model.id, messages=HELLO, tools=WEATHER, stream=True)
                         for call in part.message.tool_calls or []]
            else:
                calls = list(client.chat(model=model.id, messages=HELLO, tools=WEATHER).message.tool_calls or [])
            assert [(c.function.name, dict(c.function.arguments)) for c in calls] == [("get_weather", {"city": "Paris"})]
            assert json.loads(engine.requests[-1].shape.tools or "") == WEATHER  # type: ignore[union-attr]
            engine.scripts.append(Script(text=("Sunny.",), endless=False))
            after = client.chat(model=model.id, tools=WEATHER, messages=[
                *HELLO, {"role": "assistant", "content": "", "tool_calls": [c.model_dump() for c in calls]},
                {"role": "tool", "content": "22 C, sunny", "tool_name": "get_weather"}])
            assert after.message.content == "Sunny."
            generate = engine.requests[-1]
            assert isinstance(generate, p.Generate) and generate.messages[-2].tool_calls[0].name == "get_weather"
            assert generate.messages[-1].tool_call_id == generate.messages[-2].tool_calls[0].id  # matched by name
        client.chat(model=model.id, messages=HELLO, format="json")
        assert engine.requests[-1].shape.json_object  # type: ignore[union-attr]
        schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
        client.chat(model=model.id, messages=HELLO, format=schema)
        assert json.loads(engine.requests[-1].shape.json_schema or "") == schema  # type: ignore[union-attr]
        with pytest.raises(ollama.ResponseError) as unseeing:  # base64 images reach the service's image check
            client.chat(model=model.id, messages=[{"role": "user", "content": "What is it?", "images": [PIXEL]}])
        assert unseeing.value.status_code == 400 and "image" in unseeing.value.error


def test_embed_and_the_older_embeddings_use_the_documents_model(tmp_path: Path, tiny_model: Path) -> None:
    embedding = import_model_file(ModelLibrary(data_paths().ensure().models),
                                  build_embedding_gguf(tmp_path / "mini-embed.gguf"))
    with loop_thread() as thread, real_service(thread, tiny_model) as service, api_over(thread, service) as server:
        assert service.collections.embedding_model() == embedding.id
        client = client_of(server.address)
        got = client.embed(model=f"{embedding.id}:latest", input=["the weather is lovely", "a cat sat on the mat"])
        vectors = np.array(got.embeddings)
        assert got.model == embedding.id and vectors.shape == (2, 32)
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5) and not np.allclose(vectors[0], vectors[1])
        assert (got.prompt_eval_count or 0) > 0
        one = client.embed(model=embedding.id, input="the weather is lovely")
        assert np.allclose(one.embeddings[0], vectors[0], atol=1e-5)
        old = client.embeddings(model=embedding.id, prompt="the weather is lovely")
        assert np.allclose(old.embedding, vectors[0], atol=1e-5)
        assert client.embeddings(model=embedding.id, prompt="").embedding == []


def test_errors_are_ollamas_shape_with_its_statuses(tiny_model: Path) -> None:
    with loop_thread() as thread, real_service(thread, tiny_model, ScriptedEngine()) as service, \
            api_over(thread, service) as server:
        with pytest.raises(ollama.ResponseError) as missing:
            client_of(server.address).chat(model="no-such-model", messages=HELLO)
        assert missing.value.status_code == 404 and "no-such-model" in missing.value.error
        with pytest.raises(ollama.ResponseError) as unshown:
            client_of(server.address).show("no-such-model")
        assert unshown.value.status_code == 404
        cases = [
            ("/api/chat", {"content": b"{not json", "headers": {**AUTH, "Content-Type": "application/json"}}, 400),
            ("/api/chat", {"json": {"model": "no-such-model", "messages": HELLO}, "headers": AUTH}, 404),
            ("/api/generate", {"json": {"prompt": "x", "options": {"temperature": "hot"}}, "headers": AUTH}, 400),
            ("/api/nothing", {"json": {}, "headers": AUTH}, 404)]
        for path, sent, status in cases:
            answer = httpx.post(f"{server.address}{path}", timeout=30, **sent)  # type: ignore[arg-type]
            assert answer.status_code == status, (path, answer.text)
            body = answer.json()
            assert list(body) == ["error"] and isinstance(body["error"], str) and body["error"], (path, body)
        assert "options.temperature must be a number" in httpx.post(
            f"{server.address}/api/generate", json={"prompt": "x", "options": {"temperature": "hot"}},
            headers=AUTH, timeout=10).json()["error"]


def test_the_gates_refusals_are_ollamas_shape(tiny_model: Path) -> None:
    with loop_thread() as thread, real_service(thread, tiny_model, ScriptedEngine()) as service, \
            api_over(thread, service) as server:
        for path in ("/api/tags", "/api/version"):
            answer = httpx.get(f"{server.address}{path}", timeout=10)  # no key
            assert answer.status_code == 401 and isinstance(answer.json()["error"], str), answer.text
        with pytest.raises(ollama.ResponseError) as refused:
            client_of(server.address, key="wrong").chat(model="tiny", messages=HELLO)
        assert refused.value.status_code == 401 and "API key" in refused.value.error
        client_of(server.address).chat(model=service.session.model.id, messages=HELLO)  # type: ignore[union-attr] # the window's list of recent requests shows it
        thread.call(until(lambda: any(r.endpoint == "/api/chat" and r.status == 200
                                      for r in service.api.recent_requests), "/api/chat logged"))


def test_keyless_loopback_rules_hold_for_the_ollama_endpoints(tiny_model: Path) -> None:
    settings = ServerSettings(key=KEY, keyless_loopback=True)
    with loop_thread() as thread, real_service(thread, tiny_model, ScriptedEngine(), settings) as service, \
            api_over(thread, service) as server:
        assert client_of(server.address, key=None).list().models  # a program on this PC, no key
        foreign = httpx.get(f"{server.address}/api/tags", headers={"Host": "evil.example"}, timeout=10)
        assert foreign.status_code == 403 and "Host" in json.dumps(foreign.json())
        as_text = httpx.post(f"{server.address}/api/chat", content=json.dumps({"messages": HELLO}),
                             headers={"Content-Type": "text/plain"}, timeout=10)
        assert as_text.status_code == 415


def test_real_llama_cpp_answers_through_the_ollama_client(tiny_model: Path) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer"}},
              "required": ["ok", "n"], "additionalProperties": False}
    with loop_thread() as thread, real_service(thread, tiny_model, EngineClient()) as service, \
            api_over(thread, service) as server:
        client = client_of(server.address)
        model = service.session.model
        assert model is not None
        parts = list(client.chat(model=model.id, messages=HELLO, options={"num_predict": 5, "temperature": 0},
                                 stream=True))
        assert parts[-1].done and parts[-1].eval_count == 5 and parts[-1].done_reason == "length"
        assert sum(1 for part in parts if part.message.content) >= 1
        shaped = client.chat(model=model.id, messages=HELLO, format=schema, options={"num_predict": 200,
                                                                                     "temperature": 0})
        jsonschema.validate(json.loads(shaped.message.content or ""), schema)
