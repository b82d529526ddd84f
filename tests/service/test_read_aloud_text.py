"""AnswerFollower's pieces of a streamed answer: the first may be a clause, so that the voice starts before the
first sentence is written (voice mode's wait); every later piece is a whole sentence. No sound here: the
pieces are text (tests/service/test_read_aloud.py hears them said)."""

from __future__ import annotations

import pytest

from app.service.voice.read_aloud_text import CODE, AnswerFollower


def pieces(*deltas: str) -> tuple[list[str], str]:
    """What grow() gave for each delta, and what finish() gave at the end."""
    follower = AnswerFollower()
    return [follower.grow(delta) for delta in deltas], follower.finish()


@pytest.mark.parametrize("deltas, grown, finished", [
    # A comma after four words: the clause goes at once, the rest of its sentence once that sentence ends.
    (("Paris is the capital", " of France, and it", " lies on the Seine, in the north. It is", " old."),
     ["", "Paris is the capital of France,", "and it lies on the Seine, in the north.", ""], "It is old."),
    # A semicolon, a colon (bold around it), and a clause that ends in the same delta as it begins.
    (("Kestrels hover over fields; they hunt", " mice."), ["Kestrels hover over fields;", ""], "they hunt mice."),
    (("**Here is the short answer:** it", " depends."), ["Here is the short answer:", ""], "it depends."),
    # A dash, spaced or not, is said as a comma's pause, not as a sentence's end.
    (("The capital of France—", "Paris—is old. "), ["The capital of France,", "Paris—is old."], ""),
    (("The capital of France - ", "Paris - is old. "), ["The capital of France,", "Paris - is old."], ""),
    (("The capital of France -- Paris ", "-- is old. "), ["The capital of France,", "Paris -- is old."], ""),
])
def test_the_first_clause_is_handed_on_as_soon_as_it_is_complete(deltas: tuple[str, ...], grown: list[str],
                                                                  finished: str) -> None:
    assert pieces(*deltas) == (grown, finished)


@pytest.mark.parametrize("deltas, grown, finished", [
    # "Yes," and "Sure, of course," hold too few words to be worth a pause: the sentence goes whole.
    (("Yes, of", " course. Paris is the capital of France, ", "yes."),
     ["", "Yes, of course.", ""], "Paris is the capital of France, yes."),
    (("Sure, of course, here", " it is. "), ["", "Sure, of course, here it is."], ""),
    # Commas that are no clause's end: in a number, in inline code, in a code block, in a list's "2. ".
    (("There are 3,000,000 people in", " the city. "), ["", "There are 3,000,000 people in the city."], ""),
    (("Use `a, b, c, d, e, f`", " as the list, then"), ["", "Use a, b, c, d, e, f as the list,"], "then."),
    (("```\nx = [a, b, c, d, e]\n", "```\nDone. "), ["", f"{CODE}\nDone."], ""),
    # The last line may become a fence: nothing of it is handed on yet.
    (("`", "``\nfor a, b, c, d in x, y:\n```\n"), ["", CODE], ""),
    # A hyphen inside a word is no dash.
    (("A well-known bird of prey-like shape", " is this. "), ["", "A well-known bird of prey-like shape is this."],
     ""),
])
def test_no_clause_is_cut_where_a_pause_would_be_wrong(deltas: tuple[str, ...], grown: list[str],
                                                       finished: str) -> None:
    assert pieces(*deltas) == (grown, finished)


def test_after_the_first_piece_only_whole_sentences_are_handed_on() -> None:
    follower = AnswerFollower()
    assert follower.grow("# Kestrels\n") == "Kestrels."  # a heading's line is the first piece: no clause after it
    assert follower.grow("They hover over open fields, watching") == ""
    assert follower.grow(" for mice, voles and beetles; then") == ""
    assert follower.grow(" they drop. Next") == "They hover over open fields, watching for mice, voles and beetles; " \
                                                "then they drop."
    assert follower.finish() == "Next."


def test_a_first_clause_waits_for_thinking_and_an_open_code_block() -> None:
    assert pieces("<think>well, let me see, what is", " asked</think>The capital of France, ", "Paris. ") == (
        ["", "The capital of France,", "Paris."], "")
    follower = AnswerFollower()
    assert follower.grow("```python\nprint(a, b, c, d, e)\n") == ""  # an open block: nothing of it yet
    assert follower.grow("```\n") == CODE  # the code said once closed; it was the first piece: no clause after it
    assert follower.grow("It prints five values, one after the other, on a line") == ""
    assert follower.finish() == "It prints five values, one after the other, on a line."
