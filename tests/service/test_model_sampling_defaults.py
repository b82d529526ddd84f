"""A new chat starts from its model's recommended sampling; a chat's own settings still win."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from app.library import recommended_sampling
from tests.helpers.http_servers import sha256_of
from tests.service.conftest import SMALL, run


@pytest.fixture
def recommended(tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A catalog whose one entry is the tiny model's bytes, with a recommended sampling."""
    body = tiny_model.read_bytes()
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"version": 1, "models": [{
        "id": "tiny", "name": "Tiny", "publisher": "Nobody", "license": "mit", "parameters": "1M",
        "quantization": "F32", "format": "gguf", "context_length": 2048, "repo": "o/tiny-GGUF",
        "revision": "main", "files": [{"path": "tiny.gguf", "sha256": sha256_of(body), "size": len(body)}],
        "instruct": True, "recommended": False, "description": "A tiny model.",
        "sampling": {"temperature": 0.3, "top_p": 0.85, "top_k": 30, "repeat_penalty": 1.05, "min_p": 0.05},
        "sampling_source": "a test's catalog"}]}), encoding="utf-8")
    monkeypatch.setattr(recommended_sampling, "CATALOG_FILE", path)


def test_a_new_chat_takes_the_models_sampling_and_a_chats_own_settings_win(started_service, recommended) -> None:
    async def scenario():
        async with started_service() as started:
            chat = started.doors.chat
            _, new_chat = chat.conversation_settings()
            await chat.set_conversation_settings("", dataclasses.replace(new_chat, temperature=1.5, top_k=5))
            _, own = chat.conversation_settings()
            chat.new_conversation()
            _, next_new = chat.conversation_settings()
            return new_chat, own, next_new

    new_chat, own, next_new = run(scenario)
    assert (new_chat.temperature, new_chat.top_p, new_chat.top_k, new_chat.repeat_penalty, new_chat.min_p) \
        == (0.3, 0.85, 30, 1.05, 0.05)
    assert (new_chat.max_tokens, new_chat.context_length) == (SMALL.max_tokens, SMALL.context_length), \
        "what the model does not recommend stays the app's"
    assert (own.temperature, own.top_k, own.top_p) == (1.5, 5, 0.85), "the chat's own settings win"
    assert next_new == new_chat, "and stay that chat's"
