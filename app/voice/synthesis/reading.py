"""Text made ready to be read aloud: checked (not empty, not too long), its abbreviations and numbers written out,
and cut into sentences, so that the first can be heard while the next is made.

The text is data: nothing in it is a command (no SSML, no markup); characters that are not words,
numbers or punctuation are simply not spoken.
"""

from __future__ import annotations

import re
import unicodedata
from enum import StrEnum

from app.voice.synthesis.numbers import numbers_said

# The most a caller may ask to be read in one go (the CLI); the API's own limit is OpenAI's, 4,096.
MAX_TEXT_CHARS = 200_000
# A "sentence" longer than this (a list without full stops) is cut at a comma, else at a space: the
# model's memory and time grow with its input, and the first audio should not wait for a page.
MAX_SENTENCE_CHARS = 200

_ABBREVIATIONS = {"mr": "mister", "mrs": "missus", "ms": "miz", "dr": "doctor", "jr": "junior", "sr": "senior",
                  "prof": "professor", "vs": "versus", "etc": "et cetera", "approx": "approximately"}
_ABBREVIATION = re.compile(r"\b(" + "|".join(_ABBREVIATIONS) + r")\.(?=\s|$)", re.IGNORECASE)
_LATIN = ((re.compile(r"\be\.g\.", re.IGNORECASE), "for example"), (re.compile(r"\bi\.e\.", re.IGNORECASE), "that is"),
          (re.compile(r"\bno\.\s*(?=\d)", re.IGNORECASE), "number "))
_SYMBOLS = {"&": " and ", "+": " plus ", "=": " equals ", "@": " at ", "°": " degrees ", "–": ", ", "—": ", ",
            "…": ". ", "‘": "'", "’": "'", "“": '"', "”": '"'}
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n\s*\n|\n(?=\s*[-*•]\s)")
_SPEAKABLE = re.compile(r"[A-Za-z0-9]")
# Also Chinese and Japanese sentence ends, which need no space after them (NFKC has made ！ and ？ into ! and ?).
_ANY_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|(?<=。)\s*|(?<=[!?])(?=[\u3040-\u30ff\u3400-\u9fff])"
                               r"|\n\s*\n|\n(?=\s*[-*•]\s)")


class TextProblem(StrEnum):
    """Why a text was refused before anything was spoken."""

    EMPTY = "empty"
    TOO_LONG = "too_long"


class TextRefused(Exception):
    """The text cannot be read aloud: a problem plus facts (its length, the limit), worded by each front end."""

    def __init__(self, problem: TextProblem, length: int = 0, limit: int = 0) -> None:
        super().__init__(problem, length, limit)
        self.problem = problem
        self.length = length
        self.limit = limit


def checked(text: str, limit: int = MAX_TEXT_CHARS, *, any_script: bool = False) -> str:
    """text, or TextRefused when it holds nothing to say or is longer than limit characters. any_script: letters
    and digits of any script are something to say (a Windows voice reads Russian or Japanese); otherwise only
    Latin ones, which Kestrel's own English voices can read."""
    if len(text) > limit:
        raise TextRefused(TextProblem.TOO_LONG, len(text), limit)
    if not _speakable(unicodedata.normalize("NFKD", text), any_script):
        raise TextRefused(TextProblem.EMPTY, len(text), limit)
    return text


def sentences(text: str, *, written_out: bool = True) -> list[str]:
    """The text's sentences in order, none empty and none past MAX_SENTENCE_CHARS. written_out: abbreviations,
    numbers and symbols written out in English words and accents taken off, for Kestrel's own English voices;
    otherwise the words are left as they are (a Windows voice reads them in its language) and any script counts."""
    found: list[str] = []
    normal = _normal(text) if written_out else unicodedata.normalize("NFKC", text)
    for piece in (_SENTENCE_END if written_out else _ANY_SENTENCE_END).split(normal):
        piece = " ".join(piece.split())
        if _speakable(piece, not written_out):
            found.extend(_short(piece, not written_out))
    return found


def _speakable(text: str, any_script: bool) -> bool:
    return any(char.isalnum() for char in text) if any_script else _SPEAKABLE.search(text) is not None


def _normal(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    for symbol, words in _SYMBOLS.items():
        text = text.replace(symbol, words)
    for pattern, words in _LATIN:
        text = pattern.sub(words, text)
    text = _ABBREVIATION.sub(lambda match: _ABBREVIATIONS[match.group(1).lower()], text)
    text = numbers_said(text)
    # Accents off (café → cafe): the dictionary and the letter model know a to z.
    return "".join(char for char in unicodedata.normalize("NFD", text) if unicodedata.category(char) != "Mn")


def _short(sentence: str, any_script: bool = False) -> list[str]:
    """sentence cut at commas (else spaces) into pieces of at most MAX_SENTENCE_CHARS."""
    if len(sentence) <= MAX_SENTENCE_CHARS:
        return [sentence]
    pieces: list[str] = []
    rest = sentence
    while len(rest) > MAX_SENTENCE_CHARS:
        window = rest[:MAX_SENTENCE_CHARS]
        cut = max(window.rfind(", "), window.rfind("; "), window.rfind(": "))
        cut = cut + 1 if cut > MAX_SENTENCE_CHARS // 3 else window.rfind(" ")
        if cut <= 0:
            cut = MAX_SENTENCE_CHARS  # one unbroken run of characters
        pieces.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    return [piece for piece in [*pieces, rest] if _speakable(piece, any_script)]
