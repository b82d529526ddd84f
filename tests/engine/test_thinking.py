"""Telling a reasoning model's thinking from its answer while the text streams."""

from __future__ import annotations

import pytest

from app.engine.answers.thinking import KNOWN_MARKERS, ThinkingMarkers, ThinkingSplitter, markers_in, opens_thinking

THINK = ThinkingMarkers("<think>", "</think>")


def _split(pieces: list[str], *, inside: bool = False) -> tuple[str, str]:
    """(thinking, answer) after feeding the pieces one by one."""
    splitter = ThinkingSplitter(THINK, inside=inside)
    parts = [part for piece in pieces for part in splitter.feed(piece)] + splitter.finish()
    return ("".join(text for thinking, text in parts if thinking),
            "".join(text for thinking, text in parts if not thinking))


def test_thinking_and_answer_come_apart_without_the_markers() -> None:
    assert _split(["<think>\nLet me see.\n</think>\n\nThe answer."]) == ("Let me see.", "The answer.")


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_markers_split_over_tokens_are_still_found(size: int) -> None:
    text = "<think>\nHmm, 2 < 3 and </b> is not a marker.\n</think>\n\nYes: a <thin line."
    pieces = [text[i:i + size] for i in range(0, len(text), size)]
    assert _split(pieces) == ("Hmm, 2 < 3 and </b> is not a marker.", "Yes: a <thin line.")


def test_a_prompt_that_opened_the_block_starts_inside_it() -> None:
    # DeepSeek-R1's template ends the prompt with "<think>\n": only the close arrives.
    assert _split(["Thinking first.", "</think>", "Answer."], inside=True) == ("Thinking first.", "Answer.")


def test_a_model_that_does_not_think_gives_all_answer() -> None:
    assert _split(["Just ", "an answer."]) == ("", "Just an answer.")


def test_an_answer_cut_off_while_thinking_keeps_its_thinking() -> None:
    splitter = ThinkingSplitter(THINK)
    parts = splitter.feed("<think>Still going  ") + splitter.finish()
    assert parts == [(True, "Still going")] and splitter.thought and not splitter.closed


def test_a_second_block_after_the_answer_is_answer_text() -> None:
    assert _split(["<think>a</think>Use <think> tags."]) == ("a", "Use <think> tags.")


def test_whitespace_inside_the_thinking_is_kept_between_pieces() -> None:
    assert _split(["<think>one ", " ", "two\n\n", "three</think>x"]) == ("one  two\n\nthree", "x")


def test_markers_come_from_the_template() -> None:
    assert markers_in("{{ '<think>\\n' + reasoning + '\\n</think>' }}") == THINK
    assert markers_in("{% if x %}[THINK]{{ t }}[/THINK]{% endif %}") == ThinkingMarkers("[THINK]", "[/THINK]")
    assert markers_in("{{ '<|im_start|>' }}") is None and markers_in(None) is None
    assert all(markers.open != markers.close for markers in KNOWN_MARKERS)


def test_whether_the_prompt_leaves_thinking_open() -> None:
    assert opens_thinking("<|Assistant|><think>\n", THINK)
    # Qwen3 with thinking off writes an empty, closed block into the generation prompt.
    assert not opens_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n", THINK)
    assert not opens_thinking("<|im_start|>assistant\n", THINK)
