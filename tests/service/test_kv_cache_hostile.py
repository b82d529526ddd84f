"""Tampered saved chat states through the real engine process: every load ends quickly, the bad file goes."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Callable

import pytest

from app.core.generation import GenerationSettings
from app.engine.backends.llama import kv_state
from app.engine.protocol import ChatMessage, Done
from app.service.models.client import EngineClient
from tests.helpers.engine import answer

PROMPT = (ChatMessage("user", "Tell me everything about kestrels and their nests. " * 8),)
SETTINGS = GenerationSettings(max_tokens=8, temperature=0.0, seed=1)
# A load of the tiny model takes well under a second; a blocked one never ends.
LOAD_LIMIT_S = 30.0


async def _one_answer(model: Path, folder: Path) -> tuple[str, Done]:
    client = EngineClient()
    try:
        await asyncio.wait_for(client.load(str(model), context_length=1024, threads=1, state_ram_bytes=1 << 28,
                                           state_dir=str(folder), state_disk_bytes=1 << 30), LOAD_LIMIT_S)
        return await answer(client, PROMPT, SETTINGS)
    finally:
        await client.shutdown()


def _asked_twice(model: Path, folder: Path, tamper: Callable[[Path], Path]) -> tuple[Done, Done, Path]:
    """The same prompt in two engines, the folder tampered with in between (tamper returns the bad entry)."""
    first_text, first = asyncio.run(_one_answer(model, folder))
    bad = tamper(folder)
    second_text, second = asyncio.run(_one_answer(model, folder))
    assert second_text == first_text
    return first, second, bad


def _named(folder: Path, name: str) -> Path:
    state = next(folder.glob(f"*{kv_state.SUFFIX}"))
    return folder / f"{state.name.split('-')[0]}-{name}{kv_state.SUFFIX}"


def _fifo(folder: Path) -> Path:
    path = _named(folder, "fifo")
    os.mkfifo(path)
    return path


def _nested(folder: Path) -> Path:
    path = _named(folder, "nested")
    header = b"[" * 400_000 + b"]" * 400_000
    path.write_bytes(kv_state._PREFIX.pack(kv_state.MAGIC, kv_state.STATE_VERSION, len(header)) + header)
    return path


@pytest.mark.skipif(os.name == "nt", reason="a FIFO as a user makes one on POSIX")
def test_a_fifo_in_the_states_folder_does_not_hang_the_load(tiny_model: Path, tmp_path: Path) -> None:
    first, second, fifo = _asked_twice(tiny_model, tmp_path / "states", _fifo)
    assert second.stats.prompt_tokens_evaluated < first.stats.prompt_tokens_evaluated  # the good state was used
    assert not fifo.exists()


def test_a_deeply_nested_header_does_not_fail_the_load(tiny_model: Path, tmp_path: Path) -> None:
    first, second, nested = _asked_twice(tiny_model, tmp_path / "states", _nested)
    assert second.stats.prompt_tokens_evaluated < first.stats.prompt_tokens_evaluated
    assert not nested.exists()
