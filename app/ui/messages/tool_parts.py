"""An answer that used tools, as HTML: its text and, for each call, a compact block with arguments and result."""

from __future__ import annotations

import html
import json
from collections.abc import Collection, Sequence

from app.core.chat_markdown import markdown_parts
from app.core.conversation import Message, Part, TextPart, ToolCallPart, ToolResultPart
from app.tools.result_cut import cut_of
from app.ui.messages.markdown import markdown_to_html

# A value longer than this is shown cut, with "…"; the tooltip and Copy have it whole.
LONG_VALUE = 300
# The links a call block carries: "Show all" / "Show less" of a result, by call id.
TOOL_SCHEME = "kestrel-tool"
RESULT_LINES = 6  # a result longer than this is shown cut until "Show all"
RESULT_CHARS = 600
_LOOKS = {  # dark -> (block background, rule, muted text, error text)
    True: ("#26292d", "#3d4147", "#a3a8b0", "#ff8a80"),
    False: ("#f7f8fa", "#dcdfe4", "#5f636b", "#b3261e"),
}


def pretty_arguments(arguments: str, limit: int = LONG_VALUE) -> str:
    """The arguments as indented JSON with long strings cut (the model's own text when it is not JSON)."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return arguments
    return json.dumps(_elided(value, limit), indent=2, ensure_ascii=False)


def full_arguments(arguments: str) -> str:
    """The arguments as indented JSON, nothing cut (for the tooltip and the clipboard)."""
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False) if arguments.strip() else "{}"
    except json.JSONDecodeError:
        return arguments


def _elided(value: object, limit: int) -> object:
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]}… ({len(value):,} characters)"
    if isinstance(value, list):
        return [_elided(item, limit) for item in value]
    if isinstance(value, dict):
        return {key: _elided(item, limit) for key, item in value.items()}
    return value


def toggle_href(call_id: str, show: bool) -> str:
    return f"{TOOL_SCHEME}:{'show' if show else 'hide'}:{call_id}"


def call_from_href(href: str) -> tuple[str, bool] | None:
    """(call id, show all) from a call block's link; None for any other link."""
    prefix, _, rest = href.partition(":")
    what, _, call_id = rest.partition(":")
    if prefix != TOOL_SCHEME or what not in ("show", "hide") or not call_id:
        return None
    return call_id, what == "show"


def message_markdown(message: Message) -> str:
    """What copying a message gives: its text as written, with its tool calls and results when it used tools."""
    return "\n".join(markdown_parts(message.parts)).strip() if message.parts else message.text


def call_header(call: ToolCallPart, result: ToolResultPart | None, streaming: bool) -> str:
    """What the block's first line says: "Calling get_current_time…" until its result, then "Called …"."""
    if result is None:
        return f"Calling {call.name}…" if streaming else f"Called {call.name}: no result (the answer was stopped)"
    if result.denied:
        return f"Called {call.name}: Denied by you"
    if result.is_error:
        return f"Called {call.name}: failed"
    cut = cut_of(result.text)
    return f"Called {call.name}" + (f" (result cut to {cut.kept:,} of {cut.total:,} characters)" if cut else "")


def parts_html(parts: Sequence[Part], *, dark: bool, expanded: Collection[str] = (), streaming: bool = False) -> str:
    """The parts in order: text as Markdown, each call as a block (its result right after it)."""
    results = {part.call_id: part for part in parts if isinstance(part, ToolResultPart)}
    pieces = []
    for part in parts:
        if isinstance(part, TextPart) and part.text.strip():
            pieces.append(markdown_to_html(part.text, dark=dark))
        elif isinstance(part, ToolCallPart):
            pieces.append(_call_block(part, results.get(part.call_id), dark, part.call_id in expanded, streaming))
    return "".join(pieces)


def _call_block(call: ToolCallPart, result: ToolResultPart | None, dark: bool, expanded: bool,
                streaming: bool) -> str:
    background, rule, muted, error = _LOOKS[dark]
    head = html.escape(call_header(call, result, streaming))
    where = f' <span style="color:{muted};font-size:small">· {html.escape(call.server)}</span>' if call.server else ""
    header_color = error if result is not None and (result.is_error or result.denied) else muted
    rows = [f'<tr><td style="padding:5px 10px;color:{header_color}"><b>{head}</b>{where}</td></tr>',
            _pre_row(pretty_arguments(call.arguments), muted, rule)]
    if result is not None and not result.denied:
        rows.append(_result_row(call.call_id, result, expanded, muted, error, rule))
    # No table border: Qt draws one around every cell too; the rows' own top rules part them.
    return (f'<table width="100%" border="0" cellspacing="0" cellpadding="0" style="background:{background};'
            f'margin-top:6px;margin-bottom:6px">{"".join(rows)}</table>')


def _pre_row(text: str, color: str, rule: str) -> str:
    return (f'<tr><td style="padding:4px 10px;border-top:1px solid {rule}">'
            f'<pre style="margin:0;color:{color};white-space:pre-wrap">{html.escape(text)}</pre></td></tr>')


def _result_row(call_id: str, result: ToolResultPart, expanded: bool, muted: str, error: str, rule: str) -> str:
    text = result.text.rstrip() or "(nothing)"
    lines = text.split("\n")
    long = len(lines) > RESULT_LINES or len(text) > RESULT_CHARS
    shown = text if expanded or not long else "\n".join(lines[:RESULT_LINES])[:RESULT_CHARS] + "…"
    color = error if result.is_error else ""
    style = f"color:{color};" if color else ""
    toggle = ""
    if long:
        words = "Show less" if expanded else f"Show all ({len(lines):,} lines, {len(text):,} characters)"
        toggle = (f'<p style="margin-top:4px"><a href="{toggle_href(call_id, not expanded)}" '
                  f'style="color:{muted}">{words}</a></p>')
    return (f'<tr><td style="padding:4px 10px 6px 10px;border-top:1px solid {rule}">'
            f'<pre style="margin:0;{style}white-space:pre-wrap">{html.escape(shown)}</pre>{toggle}</td></tr>')
