"""An answer's tool calls and results, a message's files and images and an answer's sources, as Markdown that stays readable."""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.core.attachments import AttachedFile, AttachedImage, SourceRef
from app.core.conversation import Part, TextPart, ToolCallPart, ToolResultPart

# A result on the call's own line: one short line. Anything longer is a block of its own,
# cut at these limits with a note (the JSON export keeps it whole).
INLINE_CHARS = 120
SHOWN_CHARS = 2_000
SHOWN_LINES = 30
# A call's arguments are shown on its line: a file's whole text as an argument is cut.
ARGUMENT_CHARS = 300
_BACKTICKS = re.compile("`+")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")
_SEPARATORS = re.compile(r"[\\/]")
_WHITESPACE = re.compile(r"\s+")


def markdown_attachments(files: Sequence[AttachedFile]) -> list[str]:
    """The line under a user's message that names its files ("Attached: a.pdf, b.md"), or none.

    Names only: the JSON export keeps their text, which a reader of the chat does not need
    to scroll past (a PDF attached to the first question would bury the chat)."""
    if not files:
        return []
    return [f"*Attached:* {', '.join(_one_line(file.name) for file in files)}", ""]


def markdown_images(images: Sequence[AttachedImage]) -> list[str]:
    """A line under a user's message for each of its images ("[Image: photo.jpg, 1536 x 1024]").

    Named, not embedded: a Markdown file that carried them as data would be megabytes of
    base64 to scroll past; the JSON export keeps them."""
    if not images:
        return []
    return [*(f"[Image: {_one_line(image.name)}, {image.width} x {image.height}]" for image in images), ""]


def markdown_sources(sources: Sequence[SourceRef]) -> list[str]:
    """The line under an answer that names what its [n] cite ("Sources: [1] report.pdf, p. 12 · [2] …"),
    or none. Each says the file's name and where in it; the passages stay in the JSON export."""
    if not sources:
        return []
    return [f"*Sources:* {' · '.join(_source(source) for source in sources)}", ""]


def _source(source: SourceRef) -> str:
    name = _SEPARATORS.split(source.path)[-1] or source.path
    said = [f"[{source.number}] {_one_line(name)}"]
    if source.page is not None:
        said.append(f"p. {source.page}")
    if source.heading:
        said.append(_one_line(source.heading))
    return ", ".join(said)


def _one_line(text: str) -> str:
    """`text` as plain words on one line: Markdown's characters escaped, line breaks made spaces."""
    return _escaped(_WHITESPACE.sub(" ", text).strip())


def markdown_parts(parts: Sequence[Part]) -> list[str]:
    """The lines of an answer that used tools: its text, and each call as a quote with its
    result ("> Called `get_current_time({...})` on time → `14:05`"), blank-line separated."""
    results = {part.call_id: part for part in parts if isinstance(part, ToolResultPart)}
    lines: list[str] = []
    for part in parts:
        if isinstance(part, TextPart):
            if part.text.strip():
                lines += [part.text.strip(), ""]
        elif isinstance(part, ToolCallPart):
            lines += [*_quoted(_call(part, results.get(part.call_id))), ""]
    return lines


def _call(call: ToolCallPart, result: ToolResultPart | None) -> list[str]:
    arguments = " ".join(call.arguments.splitlines())  # inline code is one line
    cut = len(arguments) > ARGUMENT_CHARS
    if cut:
        arguments = arguments[:ARGUMENT_CHARS] + "…"
    said = f"Called {_code(f'{call.name}({arguments})')}"
    if call.server:
        said += f" on {_escaped(call.server)}"
    lines = []
    if cut:
        lines = ["", f"*The arguments are cut here: {len(call.arguments):,} characters in all, "
                     "kept whole in the JSON export.*"]
    if result is None:
        return [f"{said} → no result (the answer was stopped)", *lines]
    if result.denied:
        return [f"{said} → denied by the user", *lines]
    outcome = "failed: " if result.is_error else ""
    text = result.text.strip()
    if "\n" not in text and len(text) <= INLINE_CHARS:
        return [f"{said} → {outcome}{_code(text) if text else '(nothing)'}", *lines]
    return [f"{said} → {'failed' if result.is_error else 'result'}:", *lines, "", *_block(text)]


def _block(text: str) -> list[str]:
    """`text` in a fenced block, cut at SHOWN_LINES lines or SHOWN_CHARS characters."""
    shown = text[:SHOWN_CHARS].split("\n")[:SHOWN_LINES]
    kept = "\n".join(shown)
    fence = "`" * max(3, _longest_backticks(kept) + 1)
    lines = [fence, *shown, fence]
    rest = text[len(kept):]
    if rest:
        more = rest.count("\n") + (0 if rest.startswith("\n") else 1)  # a line cut part-way counts
        size = f"{more:,} more lines ({len(rest):,} characters)" if more > 1 else f"{len(rest):,} more characters"
        lines += ["", f"*Cut here: {size} of the result, kept whole in the JSON export.*"]
    return lines


def _quoted(lines: list[str]) -> list[str]:
    return [f"> {line}" if line else ">" for line in lines]


def _code(text: str) -> str:
    """`text` as inline code, whatever backticks it holds (CommonMark's longer delimiter)."""
    ticks = "`" * (_longest_backticks(text) + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return f"{ticks}{padded}{ticks}"


def _longest_backticks(text: str) -> int:
    return max((len(run) for run in _BACKTICKS.findall(text)), default=0)


def _escaped(text: str) -> str:
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)
