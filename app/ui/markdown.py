"""Markdown to the HTML subset QTextDocument renders, with highlighted code blocks."""

from __future__ import annotations

import html
from functools import lru_cache

from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.util import ClassNotFound


def _fence(md: MarkdownIt, dark: bool):
    formatter = HtmlFormatter(noclasses=True, nowrap=True, style="monokai" if dark else "friendly")
    background = "#272822" if dark else "#f4f4f4"

    def render(renderer, tokens, idx, options, env) -> str:  # Bound as a renderer method.
        token = tokens[idx]
        language = token.info.strip().split(" ")[0] if token.info else ""
        try:
            lexer = get_lexer_by_name(language) if language else TextLexer()
        except ClassNotFound:
            lexer = TextLexer()
        body = highlight(token.content, lexer, formatter)
        label = f'<div style="color:#888;font-size:small">{html.escape(language)}</div>' if language else ""
        # QTextDocument ignores CSS on <pre> backgrounds; a one-cell table carries it.
        return (f'{label}<table width="100%" cellpadding="8" style="background:{background}">'
                f'<tr><td><pre style="margin:0">{body}</pre></td></tr></table>')

    return render


@lru_cache(maxsize=2)
def _parser(dark: bool) -> MarkdownIt:
    # html=False: raw HTML in a model's answer is shown as text, never interpreted.
    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table").enable("strikethrough")
    md.add_render_rule("fence", _fence(md, dark))
    md.add_render_rule("code_block", _fence(md, dark))
    return md


TABLE_STYLE = ("<style>table.md{border-collapse:collapse} table.md td, table.md th"
               "{border:1px solid #888;padding:4px} code{font-family:monospace}</style>")


def markdown_to_html(text: str, *, dark: bool = False) -> str:
    """HTML for an assistant's answer; an unfinished code fence renders as code."""
    rendered = _parser(dark).render(text)
    rendered = rendered.replace("<table>", '<table class="md" cellspacing="0">')
    return TABLE_STYLE + rendered


def plain_to_html(text: str) -> str:
    """The user's own words, shown exactly as typed."""
    return f'<p style="white-space:pre-wrap">{html.escape(text)}</p>'
