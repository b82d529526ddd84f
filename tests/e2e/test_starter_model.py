"""End to end on real models: the CLI's first run installs the starter (Qwen2.5-Coder 1.5B
Instruct) and it answers; a second turn and cancel on Gemma 3 270M, the small real model."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.core.generation import GenerationSettings
from app.engine.protocol import ChatMessage, Delta, Done
from app.library.starter import STARTER_FILE
from app.service.models.client import EngineClient
from tests.helpers.engine import answer

ROOT = Path(__file__).resolve().parents[2]
GREEDY = GenerationSettings(temperature=0.0, max_tokens=48, seed=7, context_length=2048)


@pytest.mark.instruct
def test_cli_installs_the_starter_on_first_use_and_it_answers(starter_model: Path, kestrel_home: Path) -> None:
    command = [sys.executable, "-m", "app", "chat", "--json", "--max-tokens", "24", "--temperature", "0",
               "What is the capital of France?"]
    first = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "Setting up the starter model: 100%" in first.stderr and "checksum verified" in first.stderr
    lines = [json.loads(line) for line in first.stdout.splitlines()]
    deltas, done = lines[:-1], lines[-1]
    assert len(deltas) >= 2 and "Paris" in "".join(d["text"] for d in deltas)
    assert done["type"] == "done" and done["tokens"] >= 2 and done["tokens_per_s"] > 0
    installed = list((kestrel_home / "data" / "models").glob(f"*/{STARTER_FILE}"))
    assert len(installed) == 1 and installed[0].stat().st_size == starter_model.stat().st_size
    settings = json.loads((kestrel_home / "config" / "settings.json").read_text())
    assert settings["default_model"] == installed[0].parent.name

    again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "Setting up" not in again.stderr
    repeated = [json.loads(line) for line in again.stdout.splitlines()][:-1]
    assert repeated == deltas, "greedy decoding of the same prompt must repeat"


async def _turn(client: EngineClient, messages, settings=GREEDY) -> tuple[str, Done]:
    return await answer(client, messages, settings)


@pytest.mark.starter
def test_second_turn_evaluates_only_its_new_tokens(small_real_model: Path) -> None:
    async def scenario():
        client = EngineClient()
        try:
            await client.load(str(small_real_model), context_length=2048)
            turn1 = (ChatMessage("user", "Name three colours."),)
            answer, first = await _turn(client, turn1)
            turn2 = turn1 + (ChatMessage("assistant", answer), ChatMessage("user", "And three animals?"))
            _, second = await _turn(client, turn2)
        finally:
            await client.shutdown()
        return first.stats, second.stats

    s1, s2 = asyncio.run(scenario())
    assert s1.prompt_tokens_evaluated == s1.prompt_tokens
    # New since turn 1: the end of the answer's turn, the new user turn, the reply marker.
    new_tokens = s2.prompt_tokens - s1.prompt_tokens - s1.tokens
    assert 0 < s2.prompt_tokens_evaluated <= new_tokens + 1, (s1, s2)


@pytest.mark.starter
def test_cancel_mid_answer(small_real_model: Path) -> None:
    async def scenario():
        client = EngineClient()
        deltas = 0
        try:
            await client.load(str(small_real_model), context_length=2048)
            settings = GenerationSettings(temperature=0.8, max_tokens=2000, seed=3, context_length=2048)
            story = (ChatMessage("user", "Write a very long story about a kestrel, chapter by chapter."),)
            async for event in client.generate(story, settings):
                if isinstance(event, Delta):
                    deltas += 1
                    if deltas == 4:
                        client.cancel()
                else:
                    return event
        finally:
            await client.shutdown()

    done = asyncio.run(scenario())
    assert done.finish_reason == "cancelled"
    assert 4 <= done.stats.tokens < 2000
