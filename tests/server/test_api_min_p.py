"""min_p through the API: OpenAI's body and Ollama's options reach the engine, the model's own is the default,
and a value out of range is refused with words naming it. Real sockets, the real service, the scripted engine."""

from __future__ import annotations

from pathlib import Path

import httpx2 as httpx
import openai
import pytest

from app.engine import protocol as p
from app.library.model_defaults import ModelDefaults
from app.service.root import Service
from tests.helpers.scripted_engine import ScriptedEngine
from tests.server.helpers import KEY, api_over, loop_thread, openai_client, real_service, words

AUTH = {"Authorization": f"Bearer {KEY}"}
HELLO = [{"role": "user", "content": "Hello"}]


def _asked(engine: ScriptedEngine) -> float:
    generate = engine.requests[-1]
    assert isinstance(generate, p.Generate)
    return generate.settings.min_p


def _model_id(service: Service) -> str:
    model = service.session.model
    assert model is not None
    return model.id


def test_openai_and_ollama_requests_carry_min_p_to_the_engine(tiny_model: Path) -> None:
    engine = ScriptedEngine()
    with loop_thread() as thread, real_service(thread, tiny_model, engine) as service, \
            api_over(thread, service) as server:
        model_id = _model_id(service)
        client = openai_client(server.address)
        client.chat.completions.create(model=model_id, messages=HELLO, extra_body={"min_p": 0.05})  # type: ignore[arg-type]
        assert _asked(engine) == 0.05
        client.completions.create(model=model_id, prompt="Once", extra_body={"min_p": 0.1})
        assert _asked(engine) == 0.1
        ollama = httpx.post(f"{server.address}/api/chat", headers=AUTH, timeout=30,
                            json={"model": model_id, "messages": HELLO, "stream": False, "options": {"min_p": 0.2}})
        assert ollama.status_code == 200, ollama.text
        assert _asked(engine) == 0.2

        client.chat.completions.create(model=model_id, messages=HELLO)  # type: ignore[arg-type]
        assert _asked(engine) == 0.0, "not asked: off, as the model has none of its own"
        service.session.setup.library.set_defaults(model_id, ModelDefaults(min_p=0.07))
        client.chat.completions.create(model=model_id, messages=HELLO)  # type: ignore[arg-type]
        assert _asked(engine) == 0.07, "not asked: the model's own (a catalog recommendation is one)"
        shown = httpx.post(f"{server.address}/api/show", headers=AUTH, json={"model": model_id}, timeout=30).json()
        assert "PARAMETER min_p           0.07" in shown["modelfile"]


def test_a_min_p_out_of_range_is_refused_in_words_naming_it(tiny_model: Path) -> None:
    engine = ScriptedEngine()
    with loop_thread() as thread, real_service(thread, tiny_model, engine) as service, \
            api_over(thread, service) as server:
        model_id = _model_id(service)
        asked_before = len(engine.requests)
        with pytest.raises(openai.BadRequestError) as refused:
            openai_client(server.address).chat.completions.create(
                model=model_id, messages=HELLO, extra_body={"min_p": 1.5})  # type: ignore[arg-type]
        assert refused.value.status_code == 400
        assert words(refused.value) == "min_p must be from 0 to 1 (got 1.5)."
        assert isinstance(refused.value.body, dict) and refused.value.body["param"] == "min_p"
        ollama = httpx.post(f"{server.address}/api/chat", headers=AUTH, timeout=30,
                            json={"model": model_id, "messages": HELLO, "options": {"min_p": "lots"}})
        assert ollama.status_code == 400 and "options.min_p must be a number" in ollama.json()["error"]
        assert not [r for r in engine.requests[asked_before:] if isinstance(r, p.Generate)], "nothing was asked"
