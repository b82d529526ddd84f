"""The saved chat states' folder: in the cache folder, counted, cleared; settings and model defaults check their values."""

from __future__ import annotations

import pytest

from app.core.settings import Settings
from app.engine.backends.llama import kv_state
from app.engine.backends.llama.kv_state import StateKey
from app.library.model_defaults import ModelDefaults
from app.service.models import kv_cache


def test_states_live_in_the_cache_folder_and_clear_removes_them() -> None:
    folder = kv_cache.states_folder()
    folder.mkdir(parents=True)
    key = StateKey("m|1|2", 1024, "t", "0")
    kv_state.write_file(folder / f"{key.name}-a{kv_state.SUFFIX}", key, (1, 2, 3), b"x" * 50, False,
                        secret=b"k" * 32)
    (folder / "left.kvstate.1.tmp").write_bytes(b"half")
    assert kv_cache.usage()[0] == 1
    kv_cache.clear()
    assert kv_cache.usage() == (0, 0) and not any(folder.iterdir())


def test_no_disk_budget_means_no_folder_for_the_engine() -> None:
    ram, folder, disk = kv_cache.load_options(0)
    assert ram > 0 and folder is None and disk == 0
    assert kv_cache.load_options(10)[1] == str(kv_cache.states_folder())


def test_the_settings_check_the_budget_and_the_lookup_mode() -> None:
    assert Settings().prompt_lookup == "auto" and Settings().saved_states_mb > 0
    with pytest.raises(ValueError):
        Settings(saved_states_mb=-1).validated()
    with pytest.raises(ValueError):
        Settings(prompt_lookup="sometimes").validated()
    problems: list[str] = []
    assert Settings.from_dict({"prompt_lookup": "never"}, problems).prompt_lookup == "auto"
    assert problems == ["prompt_lookup"]


def test_a_model_can_force_lookup_on_or_off() -> None:
    assert ModelDefaults(prompt_lookup="off").validated().prompt_lookup == "off"
    problems: list[str] = []
    assert ModelDefaults.from_dict({"prompt_lookup": "maybe"}, problems).prompt_lookup is None
    assert problems


def test_the_clients_lookup_mode_goes_with_each_answer(tiny_model, monkeypatch) -> None:
    import asyncio

    from app.core.generation import GenerationSettings
    from app.engine.protocol import ChatMessage, Generate
    from app.service.models.client import EngineClient

    async def answer(mode: str) -> Generate:
        client = EngineClient()
        sent: list[Generate] = []
        send = client._send
        monkeypatch.setattr(client, "_send", lambda request, what: (sent.append(request), send(request, what)))
        try:
            await client.load(str(tiny_model), context_length=512, threads=1)
            client.prompt_lookup = mode
            async for _ in client.generate((ChatMessage("user", "a b c a b c"),), GenerationSettings(max_tokens=4)):
                pass
        finally:
            await client.shutdown()
        return next(request for request in sent if isinstance(request, Generate))

    assert asyncio.run(answer("on")).prompt_lookup == "on"
    assert asyncio.run(answer("auto")).prompt_lookup == "auto"
