"""Markdown to the HTML subset QTextDocument renders, with highlighted code blocks."""

from __future__ import annotations

import base64
import binascii
import html
from collections.abc import Callable, Sequence
from functools import lru_cache

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.util import ClassNotFound

# A code block's copy link: the code itself travels in the link, so copying it needs no
# lookup and gives exactly what was between the fences (base64: any text, URL-safe).
COPY_SCHEME = "kestrel-copy"
# Phosphor's "copy" glyph (the font QtAwesome registers), drawn as text so it is sharp at any scale.
_COPY_GLYPH = "&#xf114;"
_LOOKS = {  # dark -> (code background, header background, muted text)
    True: ("#2b2e33", "#363a40", "#a3a8b0"),
    False: ("#f5f6f8", "#e9ebef", "#5f636b"),
}
# A markdown-it render rule, called as a method of the renderer.
_RenderRule = Callable[[RendererHTML, Sequence[Token], int, OptionsDict, EnvType], str]


def copy_href(code: str) -> str:
    """The link a code block's copy button carries."""
    return f"{COPY_SCHEME}:" + base64.urlsafe_b64encode(code.encode()).decode()


def code_from_href(href: str) -> str | None:
    """The code a copy link carries; None for any other link."""
    if not href.startswith(COPY_SCHEME + ":"):
        return None
    try:
        return base64.urlsafe_b64decode(href[len(COPY_SCHEME) + 1:].encode()).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def _fence(md: MarkdownIt, dark: bool) -> _RenderRule:
    formatter = HtmlFormatter(noclasses=True, nowrap=True, style="monokai" if dark else "friendly")
    background, header, muted = _LOOKS[dark]

    def render(renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict,
               env: EnvType) -> str:  # Bound as a renderer method.
        token = tokens[idx]
        language = token.info.strip().split(" ")[0] if token.info else ""
        try:
            lexer = get_lexer_by_name(language) if language else TextLexer()
        except ClassNotFound:
            lexer = TextLexer()
        body = highlight(token.content, lexer, formatter)
        # The fence's own line end is not part of the code.
        code = token.content[:-1] if token.content.endswith("\n") else token.content
        cell = f"background:{header};color:{muted};padding:3px 10px"
        # QTextDocument ignores CSS on <pre> backgrounds; a table carries it. Its first row
        # is the header: the language, and the copy link (read by message_copy too).
        return (f'<table width="100%" cellspacing="0" cellpadding="0" style="background:{background};'
                f'margin-top:6px;margin-bottom:6px">'
                f'<tr><td style="{cell}"><span style="font-size:small">{html.escape(language)}</span></td>'
                f'<td align="right" style="{cell}"><a href="{copy_href(code)}" style="color:{muted};'
                f'text-decoration:none"><span style="font-family:Phosphor;font-size:small">{_COPY_GLYPH}</span>'
                f'<span style="font-size:small"> Copy</span></a></td></tr>'
                f'<tr><td colspan="2" style="padding:8px 10px"><pre style="margin:0">{body}</pre></td></tr></table>')

    return render


@lru_cache(maxsize=2)
def _parser(dark: bool) -> MarkdownIt:
    # html=False: raw HTML in a model's answer is shown as text, never interpreted.
    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table").enable("strikethrough")
    md.add_render_rule("fence", _fence(md, dark))
    md.add_render_rule("code_block", _fence(md, dark))
    return md


# A table's rules: quiet in both themes (a mid grey read as heavy lines on the dark one).
_RULES = {True: "#4a4e55", False: "#c9ccd2"}


def _style(dark: bool) -> str:
    return (f"<style>table.md{{border-collapse:collapse;margin-top:6px;margin-bottom:6px}} table.md td, "
            f"table.md th{{border:1px solid {_RULES[dark]};padding:4px 8px}} code{{font-family:monospace}}</style>")


def markdown_to_html(text: str, *, dark: bool = False) -> str:
    """HTML for an assistant's answer; an unfinished code fence renders as code."""
    rendered = _parser(dark).render(text)
    rendered = rendered.replace("<table>", '<table class="md" cellspacing="0">')
    return _style(dark) + rendered


def plain_to_html(text: str) -> str:
    """The user's own words, shown exactly as typed."""
    return f'<p style="white-space:pre-wrap">{html.escape(text)}</p>'
