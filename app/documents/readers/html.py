"""Web pages (HTML): their visible text and headings, read with the standard library's parser (no scripts, no styles)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from app.documents.readers import OpenedFile, ReadText, document_format
from app.documents.readers.text_files import HeadingPath, decoded_text
from app.documents.values import Section

# Elements whose content is never shown as text.
_HIDDEN = frozenset({"script", "style", "noscript", "template", "head", "svg", "math", "iframe", "object"})
# Elements that break a line: their text does not run into the next element's.
_BLOCKS = frozenset({
    "p", "div", "br", "li", "ul", "ol", "dl", "dt", "dd", "tr", "table", "section", "article", "aside",
    "header", "footer", "nav", "main", "pre", "blockquote", "hr", "figure", "figcaption", "form",
    "address", "details", "summary", "caption", "h1", "h2", "h3", "h4", "h5", "h6",
})
_CELLS = frozenset({"td", "th"})
# Void elements have no end tag, so they never open a hidden stretch.
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
                   "track", "wbr"})
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


def declared_charset(head: bytes) -> str | None:
    """The charset a page's <meta> declares in its first 2 KB, if any."""
    match = _CHARSET.search(head[:2048])
    return match.group(1).decode("ascii") if match else None


class _PageText(HTMLParser):
    """Collects text by section; a heading element starts a new section."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[Section] = []
        self._path = HeadingPath()
        self._heading: str | None = None
        self._parts: list[str] = []
        self._hidden: list[str] = []      # the open hidden elements
        self._pre = 0
        self._title_level = 0            # 1-6 while inside <h1>..<h6>
        self._title: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._hidden or tag in _HIDDEN:
            if tag not in _VOID:
                self._hidden.append(tag)
            return
        if tag in _BLOCKS:
            self._parts.append("\n")
        elif tag in _CELLS:
            self._parts.append(" | ")
        if tag == "pre":
            self._pre += 1
        if len(tag) == 2 and tag[0] == "h" and tag[1] in "123456":
            self._close_section()
            self._title_level, self._title = int(tag[1]), []

    def handle_endtag(self, tag: str) -> None:
        if self._hidden:
            if tag in self._hidden:
                while self._hidden and self._hidden.pop() != tag:
                    pass
            return
        if tag == "pre" and self._pre:
            self._pre -= 1
        if self._title_level and tag == f"h{self._title_level}":
            title = _SPACES.sub(" ", "".join(self._title)).strip()
            self._path.enter(self._title_level, title)
            self._heading = self._path.label()
            self._title_level = 0
        if tag in _BLOCKS:
            self._parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._hidden:
            return
        if not self._pre:
            data = _SPACES.sub(" ", data.replace("\n", " "))
        self._parts.append(data)
        if self._title_level:
            self._title.append(data)

    def _close_section(self) -> None:
        # Inside <pre> the line breaks are kept; the indentation is not, like every other run of spaces.
        lines = (_SPACES.sub(" ", line).strip() for line in "".join(self._parts).split("\n"))
        text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
        if text:
            self.sections.append(Section(text, None, self._heading))
        self._parts = []

    def finish(self) -> tuple[Section, ...]:
        self.close()
        self._close_section()
        return tuple(self.sections)


def html_sections(text: str) -> tuple[Section, ...]:
    """The visible text of a page, split at its <h1>–<h6> headings."""
    parser = _PageText()
    parser.feed(text)
    return parser.finish()


@document_format(kind="html", name="HTML", noun="web page", order=50, whole_in_memory=True,
                 extensions=(".html", ".htm", ".xhtml"), mime_types=("text/html", "application/xhtml+xml"))
def read_html(opened: OpenedFile) -> ReadText:
    decoded = decoded_text(opened, declared_charset)
    return ReadText(html_sections(decoded.text), decoded.note)
