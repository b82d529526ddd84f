"""A file attached in a chat, on the real instruct model: answered from, and not read again for the next question."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.generation import GenerationSettings
from app.service.models.client import EngineClient
from tests.service.conftest import run

FACTS = "The kestrel club meets on Thursdays at 7 in room 12.\n\nIts treasurer is Mira Okafor."


@pytest.mark.instruct
def test_the_second_question_reads_only_what_is_new(started_service, instruct_model: Path,
                                                    tmp_path: Path) -> None:
    notes = tmp_path / "club.txt"
    notes.write_text(f"Notes of the club.\n\n{FACTS}\n", encoding="utf-8")
    settings = GenerationSettings(max_tokens=40, temperature=0.0, context_length=2048)

    async def scenario():
        async with started_service(settings, model=instruct_model, engine=EngineClient()) as started:
            doors = started.doors
            # The chat's own settings: the starter's sampling would otherwise go over the app's greedy ones.
            await doors.chat.set_conversation_settings("", settings)
            attachments = await doors.attach.read_attachments([notes])
            assert doors.chat.send("On which day does the club meet?", attachments)
            await doors.chat.wait_idle()
            first = doors.chat.messages[-1]
            assert "Thursday" in first.text, first.text
            assert [s.number for s in first.sources] == [1]
            assert doors.chat.send("Who is the treasurer?")
            await doors.chat.wait_idle()
            second = doors.chat.messages[-1]
            assert "Okafor" in second.text, second.text
            stats = second.stats
            assert stats is not None and stats.prompt_tokens > first.stats.prompt_tokens
            # The file's turn is given as before: the engine reuses it and reads only the new turns.
            assert stats.prompt_tokens_evaluated < stats.prompt_tokens - first.stats.prompt_tokens + 60, stats

    run(scenario)
