"""A round's tool results cut to the room left in the model's context, each with a note that says so."""

from __future__ import annotations

import asyncio

from app.core.answer_stats import AnswerStats
from app.core.generation import GenerationSettings
from app.engine.protocol import Loaded
from app.service.tools.tool_room import TURN_TOKENS, ResultRoom, answer_room
from app.tools.result_cut import CutReason, ResultCut, cut_of


async def _letters(text: str) -> int:
    """A tokenizer as tight as the tiny test model's on letters: one token a character."""
    return len(text)


async def _words(text: str) -> int:
    return len(text.split())


def test_a_result_that_fits_is_given_whole_and_takes_its_tokens_from_the_room() -> None:
    room = ResultRoom(1_000, _letters)
    assert asyncio.run(room.fit("12:00 in UTC", 64_000)) == "12:00 in UTC"
    assert room.tokens == 1_000 - len("12:00 in UTC") - TURN_TOKENS


def test_a_result_too_large_for_the_room_is_cut_to_it_with_a_note() -> None:
    room = ResultRoom(1_000, _letters)
    given = asyncio.run(room.fit("x" * 200_000, 64_000))
    assert len(given) <= 1_000 - TURN_TOKENS
    kept = len(given.partition("\n")[0])
    assert kept > 500 and cut_of(given) == ResultCut(kept, 200_000, CutReason.CONTEXT)
    assert given.endswith(f"[Kestrel cut this tool result to {kept:,} of 200,000 characters to fit the model's context.]")
    # The second result of the round gets what the first left: nothing here, so only the note.
    second = asyncio.run(room.fit("y" * 5_000, 64_000))
    assert cut_of(second) == ResultCut(0, 5_000, CutReason.CONTEXT)


def test_the_settings_limit_still_applies_and_is_named() -> None:
    room = ResultRoom(100_000, _words)
    given = asyncio.run(room.fit("word " * 10_000, 1_000))
    assert cut_of(given) == ResultCut(1_000, 50_000, CutReason.SETTING)
    unknown = ResultRoom(None)  # the engine did not say what the round took: only the limit
    assert cut_of(asyncio.run(unknown.fit("z" * 2_000, 1_000))) == ResultCut(1_000, 2_000, CutReason.SETTING)
    assert asyncio.run(unknown.fit("z" * 999, 1_000)) == "z" * 999


def test_the_room_is_the_context_less_the_round_and_the_answers_room() -> None:
    class Engine:
        loaded = Loaded(1, "m.gguf", 0.0, "CPU", 4_096, 4, "llama", "chatml")

        async def count_tokens(self, text: str) -> int:
            return len(text)

    stats = AnswerStats(prompt_tokens=900, tokens=40)
    room = ResultRoom.after_round(stats, Engine(), GenerationSettings(max_tokens=512))  # type: ignore[arg-type]
    assert answer_room(4_096, 512) == 512 and answer_room(2_048, 4_000) == 512 and answer_room(128, 512) == 64
    assert room.tokens == 4_096 - 900 - 40 - 512
    assert ResultRoom.after_round(AnswerStats(), Engine(), GenerationSettings()).tokens is None  # type: ignore[arg-type]
    # A server that took a prompt past the context known here (a remote model's own is larger): not known, so a
    # result is cut only to the settings' limit, never to nothing (tests/service/test_remote_chats.py).
    beyond = AnswerStats(prompt_tokens=4_000, tokens=200)
    assert ResultRoom.after_round(beyond, Engine(), GenerationSettings()).tokens is None  # type: ignore[arg-type]


def test_a_note_cannot_be_read_from_text_that_only_looks_like_one() -> None:
    assert cut_of("plain") is None
    assert cut_of("x\n[Kestrel cut this tool result to 5 of 9 characters because I say so.]") is None
