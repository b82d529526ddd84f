"""What of an answer is read aloud: its visible words, without Markdown's marks; code said as "(code)".

A streamed answer is read as it grows (AnswerFollower): a piece is handed on once it ends in a sentence's
end or a line's, outside any code block still open, so speaking starts long before the answer ends and
never says the inside of a fence. The first piece alone may be a clause (a comma, semicolon, colon or dash
after FIRST_CLAUSE_WORDS words): the voice starts on it while the model writes the rest of the sentence,
which is what a person waits for in voice mode; later pieces are whole sentences, which the voice says with
a better tune. Thinking never reaches here (the answer's events carry it apart); a model that writes its
thinking inline in <think> tags has it taken out too.
"""

from __future__ import annotations

import re

CODE = "(code)"
LINK = "a link"
# Inline code longer than this is a snippet, not a word in a sentence: said as CODE.
_LONGEST_INLINE_CODE = 40

_FENCE = re.compile(r"^[ \t]{0,3}(```|~~~)")
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_URL = re.compile(r"<?\bhttps?://[^\s<>)]+>?")
_INLINE_CODE = re.compile(r"`+([^`\n]*)`+")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s*")
_QUOTE = re.compile(r"^\s*(>\s*)+")
_BULLET = re.compile(r"^\s*[-*+•]\s+(\[[ xX]\]\s+)?")
_NUMBERED = re.compile(r"^\s*(\d+)[.)]\s+")
_RULE = re.compile(r"^\s*([-*_]\s*){3,}$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_TAG = re.compile(r"</?[A-Za-z][^>\n]*>")
_EMPHASIS = re.compile(r"(?<![\w*])(\*{1,3}|_{1,3}|~~)(?=\S)|(?<=\S)(\*{1,3}|_{1,3}|~~)(?![\w*])")
_ENDS_SAID = re.compile(r"[.!?:;,]$")
_SPEAKABLE = re.compile(r"[A-Za-z0-9]")
# Where a streamed piece may end: after a sentence's end and the space that follows it, or after a line.
_BOUNDARY = re.compile(r"[.!?][\"')\]*_`]*[ \t]+|\n")
# Where the first piece may end as well: after a clause's comma, semicolon or colon and its space, or a dash
# (a spaced hyphen, an en or em dash), once it holds this many words: "Sure," alone is not worth a pause.
FIRST_CLAUSE_WORDS = 4
_CLAUSE = re.compile(r"[,;:][\"')\]*_`]*[ \t]+|[ \t]+--?[ \t]+|[ \t]*[—–][ \t]*")
_TRAILING_DASH = re.compile(r"[ \t]*(--?|[—–])[ \t]*$")
_WORD = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)?")


def speakable(markdown: str) -> str:
    """The words of an answer as they are read: Markdown's marks gone, code blocks as CODE, each line a
    sentence (a heading or a list item gets its full stop, so the voice pauses after it)."""
    text = _THINK.sub("", markdown)
    lines: list[str] = []
    in_fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            if not in_fence:
                lines.append(CODE)
            in_fence = not in_fence
            continue
        if not in_fence:
            lines.append(_line(line))
    return "\n".join(lines).strip()


def _line(line: str) -> str:
    if _RULE.match(line) or _TABLE_RULE.match(line):
        return ""
    line = _QUOTE.sub("", _HEADING.sub("", line))
    line = _BULLET.sub("", line)
    line = _NUMBERED.sub(r"\1: ", line)
    line = _IMAGE.sub(r"\1", line)
    line = _LINK.sub(r"\1", line)
    line = _URL.sub(LINK, line)
    line = _INLINE_CODE.sub(lambda code: code.group(1) if len(code.group(1)) <= _LONGEST_INLINE_CODE else CODE, line)
    line = _TAG.sub("", line)
    line = _EMPHASIS.sub("", line)
    if line.count("|") >= 2:  # a table's row: its cells, one after the other
        line = ", ".join(cell.strip() for cell in line.strip().strip("|").split("|") if cell.strip())
    line = line.strip()
    if _SPEAKABLE.search(line) and not _ENDS_SAID.search(line):
        line += "."
    return line


class AnswerFollower:
    """A growing answer's text, handed on in pieces that are whole: grow() with each delta gives the text
    that has become complete since (possibly ""), finish() the rest once the answer has ended. The first
    piece may be a clause (FIRST_CLAUSE_WORDS); every later one ends at a sentence's or a line's end."""

    def __init__(self) -> None:
        self._raw = ""
        self._taken = 0
        self._handed = False  # a piece with words in it was handed on: no more clauses

    def grow(self, delta: str) -> str:
        self._raw += delta
        limit, fences = self._open_parts()
        end = self._settled_end(limit, fences)
        if end <= self._taken and not self._handed:
            return self._hand(self._first_clause_end(limit, fences), clause=True)
        return self._hand(end)

    def finish(self) -> str:
        """What was not handed on yet, as it is now (an unclosed code block is still said as CODE)."""
        return self._hand(len(self._raw))

    def _hand(self, end: int, *, clause: bool = False) -> str:
        if end <= self._taken:
            return ""
        piece, self._taken = self._raw[self._taken:end], end
        if clause:  # a dash is said as the pause it is, not as a sentence's end
            piece = _TRAILING_DASH.sub(",", piece)
        said = speakable(piece)
        self._handed = self._handed or bool(said)
        return said

    def _open_parts(self) -> tuple[int, list[int]]:
        """Where handing on must stop for now (before a code block still open, inline code or thinking still
        open, and a last line that may yet become a fence), and where each fence line starts."""
        limit = len(self._raw)
        at = 0
        fences: list[int] = []
        for line in self._raw.splitlines(keepends=True):
            if not line.endswith("\n"):  # the line being written
                if line.lstrip().startswith(("`", "~")):
                    limit = at
                break
            if _FENCE.match(line):
                fences.append(at)
            at += len(line)
        if len(fences) % 2:
            limit = min(limit, fences[-1])
        rest = self._raw[self._taken:].lower()
        if "<think>" in rest and "</think>" not in rest:
            limit = min(limit, self._taken + rest.index("<think>"))
        return limit, fences

    def _settled_end(self, limit: int, fences: list[int]) -> int:
        """Where the text handed on may end now: the last sentence's or line's end after what was taken and
        before limit, outside every code block and inline code."""
        end = self._taken
        for boundary in _BOUNDARY.finditer(self._raw, self._taken, limit):
            if self._inside(boundary.start(), boundary.end(), fences):
                continue
            end = boundary.end()
        return end

    def _first_clause_end(self, limit: int, fences: list[int]) -> int:
        """Where the answer's first clause ends, if one of FIRST_CLAUSE_WORDS words is complete (else taken)."""
        for boundary in _CLAUSE.finditer(self._raw, self._taken, limit):
            if self._inside(boundary.start(), boundary.end(), fences):
                continue
            if len(_WORD.findall(speakable(self._raw[self._taken:boundary.start()]))) >= FIRST_CLAUSE_WORDS:
                return boundary.end()
        return self._taken

    def _inside(self, start: int, end: int, fences: list[int]) -> bool:
        """Whether a boundary from start to end is no place to stop: inside a code block, a numbered list's
        "2. ", or inside inline code."""
        if sum(1 for fence in fences if fence < start) % 2 or self._number_marker(start):
            return True
        return bool(self._raw[self._taken:end].count("`") % 2)

    def _number_marker(self, position: int) -> bool:
        """Whether the full stop at position is a numbered list's ("2. ") rather than a sentence's end."""
        line_start = self._raw.rfind("\n", 0, position) + 1
        return self._raw[position] == "." and self._raw[line_start:position].strip().isdigit()
