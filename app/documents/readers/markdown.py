"""Markdown: read as text and split at its ATX and setext headings, outside fenced code and front matter."""

from __future__ import annotations

import re

from app.documents.readers import OpenedFile, ReadText, document_format
from app.documents.readers.text_files import HeadingPath, decoded_text
from app.documents.values import Section

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_LIST_ITEM = re.compile(r"^\s*([-*+]|\d+[.)])\s")


def markdown_sections(text: str) -> tuple[Section, ...]:
    """Split Markdown at its ATX (`## Setup`) and setext (underlined) headings, outside fenced
    code; each section keeps its own heading line as its first line."""
    sections: list[Section] = []
    path = HeadingPath()
    current: list[str] = []
    heading: str | None = None
    lines = text.splitlines()
    # YAML front matter ("---" ... "---" at the top) is kept as text, its closing line no heading.
    fence: str | None = "---" if lines and lines[0].strip() == "---" else None

    def close() -> None:
        body = "\n".join(current).strip()
        if body:
            sections.append(Section(body, None, heading))
        current.clear()

    for index, line in enumerate(lines):
        if index == 0 and fence is not None:
            current.append(line)
            continue
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            current.append(line)
            continue
        opening = _FENCE.match(line)
        if opening:
            fence = opening.group(1)
            current.append(line)
            continue
        atx = _ATX.match(line)
        underline = _SETEXT.match(lines[index + 1]) if index + 1 < len(lines) else None
        if atx:
            level, title = len(atx.group(1)), (atx.group(2) or "").strip()
        elif underline and line.strip() and not _LIST_ITEM.match(line) and not line.startswith(("    ", "\t")):
            level, title = (1 if underline.group(1).startswith("=") else 2), line.strip()
        else:
            if current or line.strip():
                current.append(line)
            continue
        close()
        path.enter(level, title)
        heading = path.label()
        current.append(line)
    close()
    return tuple(sections)


@document_format(kind="markdown", name="Markdown", noun="Markdown file", order=30, whole_in_memory=True,
                 extensions=(".md", ".markdown", ".mdown", ".mkd", ".mdx"), mime_types=("text/markdown",))
def read_markdown(opened: OpenedFile) -> ReadText:
    decoded = decoded_text(opened)
    return ReadText(markdown_sections(decoded.text), decoded.note)
