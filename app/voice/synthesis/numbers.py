"""Numbers as English words, the way they are read aloud: 1,024 → one thousand twenty four; 1999 → nineteen ninety nine."""

from __future__ import annotations

import re

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
         "seventeen eighteen nineteen").split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = ((10 ** 12, "trillion"), (10 ** 9, "billion"), (10 ** 6, "million"), (1000, "thousand"), (100, "hundred"))
_ORDINAL_ENDS = {"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
                 "nine": "ninth", "twelve": "twelfth"}
# Past this a number is read digit by digit: nobody reads a 20-digit figure as quadrillions.
_LARGEST = 10 ** 15 - 1

_MONEY = re.compile(r"([$£€])(\d[\d,]*)(?:\.(\d\d))?\b")
_PERCENT = re.compile(r"(\d[\d,]*(?:\.\d+)?)\s?%")
_ORDINAL = re.compile(r"\b(\d+)(st|nd|rd|th)\b", re.IGNORECASE)
_DECIMAL = re.compile(r"\b(\d[\d,]*)\.(\d+)\b")
_NUMBER = re.compile(r"\d[\d,]*")
_CURRENCY = {"$": ("dollar", "dollars", "cent", "cents"), "£": ("pound", "pounds", "penny", "pence"),
             "€": ("euro", "euros", "cent", "cents")}


def cardinal(number: int) -> str:
    """The words of a whole number (negative ones too)."""
    if number < 0:
        return "minus " + cardinal(-number)
    if number > _LARGEST:
        return digits(str(number))
    if number < 20:
        return _ONES[number]
    if number < 100:
        tens, ones = divmod(number, 10)
        return _TENS[tens] + (" " + _ONES[ones] if ones else "")
    for scale, name in _SCALES:
        if number >= scale:
            high, rest = divmod(number, scale)
            return f"{cardinal(high)} {name}" + (" " + cardinal(rest) if rest else "")
    raise AssertionError(number)  # every number >= 100 meets a scale


def ordinal(number: int) -> str:
    words = cardinal(number).split()
    last = words[-1]
    if last in _ORDINAL_ENDS:
        words[-1] = _ORDINAL_ENDS[last]
    elif last.endswith("y"):
        words[-1] = last[:-1] + "ieth"
    else:
        words[-1] = last + "th"
    return " ".join(words)


def digits(text: str) -> str:
    return " ".join(_ONES[int(digit)] for digit in text if digit.isdigit())


def _whole(text: str) -> str:
    """A written whole number (1,024 or 1999) in words; four-digit numbers from 1100 to 1999 as years."""
    plain = text.replace(",", "")
    if not plain:
        return text
    if len(plain) > 1 and plain.startswith("0"):
        return digits(plain)
    number = int(plain)
    if "," not in text and 1100 <= number <= 1999 and number % 100 != 0:
        high, low = divmod(number, 100)
        return f"{cardinal(high)} {'oh ' + cardinal(low) if low < 10 else cardinal(low)}"
    return cardinal(number)


def _money(match: re.Match[str]) -> str:
    one, many, small_one, small_many = _CURRENCY[match.group(1)]
    whole = int(match.group(2).replace(",", "") or 0)
    said = f"{_whole(match.group(2))} {one if whole == 1 else many}"
    cents = int(match.group(3) or 0)
    if cents:
        said += f" {cardinal(cents)} {small_one if cents == 1 else small_many}"
    return said


def _decimal(match: re.Match[str]) -> str:
    return f"{_whole(match.group(1))} point {digits(match.group(2))}"


def numbers_said(text: str) -> str:
    """text with its amounts, percentages, ordinals, decimals and whole numbers written out as words."""
    text = _MONEY.sub(_money, text)
    text = _PERCENT.sub(lambda match: f"{match.group(1)} percent", text)
    text = _ORDINAL.sub(lambda match: ordinal(int(match.group(1))), text)
    text = _DECIMAL.sub(_decimal, text)
    return _NUMBER.sub(lambda match: _whole(match.group(0).rstrip(",")) + ("," if match.group(0).endswith(",") else ""),
                       text)
