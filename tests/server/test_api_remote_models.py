"""The API server lists the models of the servers the person added, each as SERVER/MODEL, and answers with them:
the official openai client and raw /api/tags over real sockets, the real service and engine, a real peer on
127.0.0.1 speaking Ollama's API and a server that is off."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import openai
import pytest

from app.library.servers.records import ServerKind
from app.service.models.client import EngineClient
from tests.helpers.hostile_server import Script, hostile_server
from tests.helpers.remote_answers import add_server
from tests.helpers.remote_peers import closed_port
from tests.server.helpers import KEY, api_over, chat_entries, loop_thread, openai_client, real_service

HELLO: list[Any] = [{"role": "user", "content": "Hello"}]


def tags(address: str) -> list[str]:
    asked = urllib.request.Request(f"{address}/api/tags", headers={"Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(asked, timeout=60) as answer:
        return [entry["name"] for entry in json.loads(answer.read())["models"]]


def test_remote_models_are_listed_by_server_and_answer_through_the_openai_client(tiny_model: Path) -> None:
    script = Script(models=["qwen2.5:7b", "llama3.1:8b"], ollama=True, words=["Hello", " from", " afar"])
    with hostile_server(script) as url:
        add_server("studio-pc", url, ServerKind.OLLAMA)
        add_server("old laptop", f"http://127.0.0.1:{closed_port()}", ServerKind.OPENAI)
        with loop_thread() as thread, real_service(thread, tiny_model, EngineClient()) as service, \
                api_over(thread, service) as server:
            assert script.requests == []  # starting the service and the API server contacts no server
            local = service.session.model
            assert local is not None
            client = openai_client(server.address)
            models = {m.id: m for m in chat_entries(client.models.list().data)}
            assert list(models) == [local.id, "studio-pc/qwen2.5:7b", "studio-pc/llama3.1:8b"]  # the server off: none
            remote = models["studio-pc/qwen2.5:7b"].model_extra
            assert remote is not None
            assert remote["name"] == "qwen2.5:7b on studio-pc" and remote["format"] == "remote"
            assert remote["loaded"] is False
            assert tags(server.address) == [local.id, "studio-pc/qwen2.5:7b", "studio-pc/llama3.1:8b"]
            asked = len(script.requests)
            client.models.list()
            assert len(script.requests) == asked  # listed again within a minute: the last answer is used

            whole = client.chat.completions.create(model="studio-pc/qwen2.5:7b", messages=HELLO, temperature=0.0)
            assert whole.choices[0].message.content == "Hello from afar"
            assert whole.model == "studio-pc/qwen2.5:7b"
            assert any(body.get("model") == "qwen2.5:7b" for body in script.bodies)
            streamed = client.chat.completions.create(model="studio-pc/qwen2.5:7b", messages=HELLO, stream=True)
            pieces = [chunk.choices[0].delta.content or "" for chunk in streamed if chunk.choices]
            assert "".join(pieces) == "Hello from afar"
            assert client.models.retrieve("studio-pc/qwen2.5:7b").model_extra["loaded"] is True  # type: ignore[index]

            with pytest.raises(openai.NotFoundError) as refused:
                client.chat.completions.create(model="nowhere/qwen2.5:7b", messages=HELLO)
            assert "not installed in Kestrel" in str(refused.value)
