"""AnswerText: whole UTF-8 characters only, stop strings never shown."""

from __future__ import annotations

from app.engine.answers.answer_text import AnswerText


def _feed_bytes(answer: AnswerText, data: bytes, size: int) -> list[str]:
    chunks = [answer.feed(data[i:i + size]) for i in range(0, len(data), size)]
    chunks.append(answer.finish())
    return chunks


def test_characters_split_across_tokens_are_held_until_whole() -> None:
    text = "Kestrel 🦅 fliegt über 世界"
    answer = AnswerText()
    chunks = _feed_bytes(answer, text.encode("utf-8"), 1)
    assert "".join(chunks) == text
    assert all("\ufffd" not in chunk for chunk in chunks)
    # The 4-byte eagle arrives as one chunk, after three empty ones.
    assert "🦅" in chunks
    assert chunks[chunks.index("🦅") - 3 : chunks.index("🦅")] == ["", "", ""]


def test_a_cut_off_character_at_the_end_is_dropped_not_broken() -> None:
    answer = AnswerText()
    assert answer.feed("ok ".encode() + "🦅".encode()[:2]) == "ok "
    assert answer.finish() == ""
    assert answer.text == "ok "


def test_leading_whitespace_of_the_answer_is_dropped() -> None:
    answer = AnswerText()
    assert answer.feed(b"\n ") == ""
    assert answer.feed(b" Hi there") == "Hi there"


def test_stop_string_ends_the_answer_and_is_never_shown() -> None:
    answer = AnswerText(stops=("<end_of_turn>",))
    shown = [answer.feed(piece) for piece in (b"Hello", b" world<end", b"_of_", b"turn>more")]
    assert "".join(shown) == "Hello world"
    assert shown[1] == " world"  # "<end" is held back: it may be the start of the stop
    assert answer.stopped_by == "<end_of_turn>"
    assert answer.feed(b"after") == "" and answer.finish() == ""


def test_held_text_that_is_not_a_stop_after_all_is_released() -> None:
    answer = AnswerText(stops=("###",))
    assert answer.feed(b"a #") == "a "
    assert answer.feed(b"# b") == "## b"
    assert answer.finish() == ""
    assert answer.text == "a ## b"


def test_the_earliest_of_several_stops_wins() -> None:
    answer = AnswerText(stops=("STOP", "ST"))
    assert answer.feed(b"xxSTOPyy") == "xx"
    assert answer.stopped_by == "ST"
