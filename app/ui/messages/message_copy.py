"""A selection in a message's laid-out text, as plain text or as Markdown.

Qt's own QTextDocumentFragment.toMarkdown() loses inline code, and writes our code blocks
(tables, for their background) as broken table rows; this writer knows how markdown.py
renders: a code block is a table whose last row holds <pre> lines and whose first row is
its header (the language, the copy link), which is never copied. A wrapped or scrolled
code line is still one block: it copies as the line it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from PySide6.QtGui import QTextBlock, QTextCharFormat, QTextCursor, QTextFormat, QTextList, QTextListFormat, QTextTable

from app.ui.messages.code_blocks import is_code_table

_NUMBERED = {QTextListFormat.Style.ListDecimal, QTextListFormat.Style.ListLowerAlpha,
             QTextListFormat.Style.ListUpperAlpha, QTextListFormat.Style.ListLowerRoman,
             QTextListFormat.Style.ListUpperRoman}
_RULE = QTextFormat.Property.BlockTrailingHorizontalRulerWidth
_QUOTE = QTextFormat.Property.BlockQuoteLevel


@dataclass
class _Line:
    """One block's selected part, as it will be written."""

    kind: str  # "text", "item", "code", "cell", "rule"
    text: str
    group: int = -1  # lines of one code block, table or list run join with a single newline
    cells: list[str] = field(default_factory=list)
    header: bool = False  # a table's first row
    row: int = 0  # a table cell's row
    language: str = ""
    tight: bool = False  # a line of the paragraph above (the user's own line breaks), not a new one


def selection_text(cursor: QTextCursor) -> str:
    """The selection as the plain text it shows (bullets and numbers included)."""
    return _join(_lines(cursor, markdown=False), markdown=False)


def selection_markdown(cursor: QTextCursor) -> str:
    """The selection as Markdown: emphasis, inline code, links, headings, lists, code fences, tables."""
    return _join(_lines(cursor, markdown=True), markdown=True)


def _lines(cursor: QTextCursor, markdown: bool) -> list[_Line]:
    start, end = cursor.selectionStart(), cursor.selectionEnd()
    cells = None
    if cursor.hasComplexSelection():
        # A drag across table cells selects whole cells, a rectangle of them.
        table = cursor.currentTable()
        first_row, rows, first_column, columns = cast(tuple[int, int, int, int], cursor.selectedTableCells())
        start, end = table.firstPosition(), table.lastPosition()
        cells = (table, range(first_row, first_row + rows), range(first_column, first_column + columns))
    lines: list[_Line] = []
    block = cursor.document().findBlock(start)
    while block.isValid() and block.position() <= end:
        low, high = max(start, block.position()), min(end, block.position() + block.length() - 1)
        whole = start <= block.position() and block.position() + block.length() - 1 <= end
        if cells is not None:
            whole = _in_cells(block, *cells)
            low, high = (block.position(), block.position() + block.length() - 1) if whole else (0, 0)
        if high > low or whole:
            line = _line(block, low, high, markdown)
            if line is not None and (line.text or line.cells or line.kind == "code" or line.tight):
                _add(lines, line)
        block = block.next()
    return lines


def _in_cells(block: QTextBlock, table: QTextTable, rows: range, columns: range) -> bool:
    cell = table.cellAt(block.position())
    return cell.isValid() and QTextCursor(block).currentTable() == table and cell.row() in rows \
        and cell.column() in columns


def _line(block: QTextBlock, low: int, high: int, markdown: bool) -> _Line | None:
    table = QTextCursor(block).currentTable()
    if table is not None:
        cell = table.cellAt(block.position())
        group = table.firstPosition()
        if is_code_table(table):
            if cell.row() == 0:
                return None  # the header: its language goes on the fence, its link is a button
            language = _cell_text(table, 0, 0) if markdown else ""
            return _Line("code", _raw(block, low, high), group, language=language)
        text = _inline(block, low, high, markdown, bold=cell.row() > 0)
        return _Line("cell", "", group, cells=[text], header=cell.row() == 0, row=cell.row())
    form = block.blockFormat()
    if form.hasProperty(_RULE):
        return _Line("rule", "---" if markdown else "")
    level = form.headingLevel()
    text = _inline(block, low, high, markdown, bold=not level).rstrip()
    items = block.textList()
    if items is not None:
        return _Line("item", _bullet(items, block) + text)
    if markdown and level:
        return _Line("text", "#" * level + " " + text)
    quote = int(form.property(_QUOTE) or 0)
    if markdown and quote:
        return _Line("text", "> " * quote + text)
    return _Line("text", text, tight=not level and _tight(block))


def _tight(block: QTextBlock) -> bool:
    """Whether a block goes on the paragraph above with no space between (a line break in it)."""
    above = block.previous()
    return (above.isValid() and block.blockFormat().topMargin() == 0 and above.blockFormat().bottomMargin() == 0
            and above.textList() is None and above.blockFormat().headingLevel() == 0
            and QTextCursor(above).currentTable() is None and not above.blockFormat().hasProperty(_RULE))


def _bullet(items: QTextList, block: QTextBlock) -> str:
    form = items.format()
    indent = "   " * max(0, form.indent() - 1)
    if form.style() in _NUMBERED:
        return f"{indent}{items.itemNumber(block) + 1}. "
    return f"{indent}- "


def _cell_text(table: QTextTable, row: int, column: int) -> str:
    cell = table.cellAt(row, column)
    return cell.firstCursorPosition().block().text().strip()


def _raw(block: QTextBlock, low: int, high: int) -> str:
    return _clean(block.text()[low - block.position():high - block.position()])


def _inline(block: QTextBlock, low: int, high: int, markdown: bool, bold: bool = True) -> str:
    """The selected part of a block, with Markdown's inline marks when asked."""
    parts: list[str] = []
    fragments = block.begin()
    while not fragments.atEnd():
        fragment = fragments.fragment()
        first = max(low, fragment.position())
        last = min(high, fragment.position() + fragment.length())
        if last > first:
            text = _clean(fragment.text()[first - fragment.position():last - fragment.position()])
            parts.append(_marked(text, fragment.charFormat(), bold) if markdown else text)
        fragments += 1
    return "".join(parts)


def _marked(text: str, form: QTextCharFormat, bold: bool) -> str:
    core = text.strip()
    if not core:
        return text
    # Marks go round the words, the spaces outside them: "** x**" is not bold in Markdown.
    before, after = text[:len(text) - len(text.lstrip())], text[len(text.rstrip()):]
    if "monospace" in (form.fontFamilies() or []) or form.fontFixedPitch():
        core = f"`{core}`"
    else:
        if form.fontStrikeOut():
            core = f"~~{core}~~"
        if form.fontItalic():
            core = f"*{core}*"
        if bold and form.fontWeight() >= 600:
            core = f"**{core}**"
    href = form.anchorHref()
    if href and form.isAnchor():
        core = f"[{core}]({href})"
    return before + core + after


def _clean(text: str) -> str:
    # Qt keeps a <br> as U+2028 and turns spaces it must keep into no-break spaces.
    return text.replace("\u2028", "\n").replace("\u00a0", " ")


def _add(lines: list[_Line], line: _Line) -> None:
    """Append, merging the cells of one table row into one line."""
    last = lines[-1] if lines else None
    if (line.kind == "cell" and last is not None and last.kind == "cell" and last.group == line.group
            and last.row == line.row):
        last.cells.extend(line.cells)
        return
    lines.append(line)


def _join(lines: list[_Line], markdown: bool) -> str:
    out: list[str] = []
    previous: _Line | None = None
    for number, line in enumerate(lines):
        fenced = _fenced(lines, number) if line.kind == "code" and markdown else None
        if line.kind == "code" and markdown and fenced is None:
            previous = line
            continue
        text = fenced if fenced is not None else _written(line, markdown)
        if out:
            same = previous is not None and previous.kind == line.kind and (
                line.kind == "item" or (line.kind == "text" and line.tight)
                or (line.kind in ("code", "cell") and previous.group == line.group))
            out.append("\n" if same else "\n\n")
        out.append(text)
        previous = line
        if markdown and line.kind == "cell" and line.header:
            out.append("\n|" + "|".join("---" for _ in line.cells) + "|")
    return "".join(out).strip("\n") if markdown else "".join(out)


def _written(line: _Line, markdown: bool) -> str:
    if line.kind == "cell":
        return "| " + " | ".join(line.cells) + " |" if markdown else "\t".join(line.cells)
    return line.text


def _fenced(lines: list[_Line], number: int) -> str | None:
    """A code block's lines as one fence, written at its first line (None for the others)."""
    line = lines[number]
    if number and lines[number - 1].kind == "code" and lines[number - 1].group == line.group:
        return None
    body = [other.text for other in lines[number:] if other.kind == "code" and other.group == line.group]
    fence = "````" if any(text.lstrip().startswith("```") for text in body) else "```"
    return f"{fence}{line.language}\n" + "\n".join(body) + f"\n{fence}"
