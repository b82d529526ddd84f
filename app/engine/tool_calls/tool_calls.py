"""Tool calls read back from a model's streamed text, per chat-template family.

Tools reach a model through its own chat template, and each family of templates teaches its
models one way of writing a call. The family is told from the template's text (the markers
it writes into earlier turns or its tool instructions), never from the model's name. The
formats were read from the templates themselves (tests/fixtures/chat_templates and
tests/fixtures/tool_calls/templates, SOURCES.md says where each came from) and from
llama.cpp's common/chat.cpp, which parses the same families:

- HERMES (Qwen 2.5, Qwen 3, QwQ, Hermes 3, Granite 4.0): `<tool_call>{"name", "arguments"}
  </tool_call>`, one block per call. As llama.cpp's Hermes parser does, a call in a ```json
  fence, or an answer that is just the call object, counts too: Qwen2.5-Coder 0.5B answers
  so (tests/fixtures/tool_calls/qwen2.5-coder-0.5b-recorded.json). Where the template prints its
  call example in doubled braces (Qwen2.5's own: `{{"name": <function-name>, ...}}`), the call
  object in doubled braces counts as well: Qwen2.5-Coder 1.5B answers a tool's result so (issue 37).
- LLAMA3 (Llama 3.1, 3.2, 3.3): the answer is `{"name", "parameters"}`, bare or after
  `<|python_tag|>` (several separated by `;`). Bare JSON is a call only when the whole
  answer starts with `{` and parses as one; any other JSON stays text.
- MISTRAL: `[TOOL_CALLS][{"name", "arguments"}, ...]` (Nemo, Small 3.1) and the newer
  `[TOOL_CALLS]name[CALL_ID]id[ARGS]{...}` (Small 3.2, Devstral).
- PHI4 (Phi-4-mini, in llama.cpp's tool-use template; Granite 3.3): `<|tool_call|>` then a
  call object or a list of them, then `<|/tool_call|>` (Granite writes no closing tag).
- GEMMA: Gemma 3's own template takes no tools, and Google's function-calling guide says
  Gemma 3 writes no tool token: a prompt must teach it a format of the app's choosing
  (`[func(a=1)]` in the guide). llama.cpp has no Gemma 3 format either (it falls back to
  its own grammar-forced "generic" JSON). So a Gemma 3 template is None here, and this
  family is the notation Google's tool-calling Gemmas were trained on:
  `call:NAME{key:<q>text<q>,n:1}`, FunctionGemma (a Gemma 3 270M) between
  `<start_function_call>` and `<end_function_call>` with `<escape>` as <q>, Gemma 4 between
  `<|tool_call>` and `<tool_call|>` with `<|"|>` (as its template writes earlier calls).
  llama.cpp reads FunctionGemma's the same way (COMMON_CHAT_FORMAT_FUNCTION_GEMMA); JSON
  arguments after `call:NAME`, as its google-functiongemma.jinja writes them, are read too.
- GPT_OSS (harmony): `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>
  {...}<|call|>`, the recipient also accepted in the start header, as the template writes
  it. Messages to no function (analysis, final) pass through untouched.

Qwen3-Coder, GLM and Hunyuan write XML-style arguments inside `<tool_call>`, and other
families (Command R, DeepSeek, Kimi, LFM2, MiniMax, Seed-OSS, Nemotron, functionary) have
formats of their own: their templates give None, so no tools are offered to them.

The markers are control tokens in most vocabularies: the text fed here must render them.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from enum import StrEnum
from typing import Collection, Sequence

from app.engine.protocol import ToolCall
from app.engine.tool_calls.tool_call_families import SYNTAXES, Block, Problem, RawCall


@dataclass(frozen=True)
class OpenCall:
    """A call block the model has opened and not closed: the how-manieth, and its text so far."""

    number: int
    text: str


class ToolFamily(StrEnum):
    """The ways chat-template families write a tool call (the module docstring shows each)."""

    HERMES = "hermes"
    LLAMA3 = "llama3"
    MISTRAL = "mistral"
    PHI4 = "phi4"
    GEMMA = "gemma"
    GPT_OSS = "gpt_oss"


# Templates that use <tool_call> around XML-style arguments (Qwen3-Coder, GLM, Hunyuan), not JSON.
_XML_ARGUMENTS = ("<function=", "<arg_key>", "<tool_sep>")


def family_of(template: str | None) -> ToolFamily | None:
    """From the chat template's text (never the model's name); None: the template takes no tools
    (or writes calls in a form not read here). The markers are checked most specific first."""
    if not template:
        return None
    if "<|channel|>" in template and "functions." in template and "<|call|>" in template:
        return ToolFamily.GPT_OSS
    if "<start_function_call>" in template or "<|tool_call>" in template:
        return ToolFamily.GEMMA
    if "<|tool_call|>" in template:
        return ToolFamily.PHI4
    if "[TOOL_CALLS]" in template:
        return ToolFamily.MISTRAL
    if "<tool_call>" in template:
        return None if any(marker in template for marker in _XML_ARGUMENTS) else ToolFamily.HERMES
    if "<|python_tag|>" in template or ("ipython" in template and '"parameters"' in template):
        return ToolFamily.LLAMA3
    return None


# Qwen2.5's template prints its call example in doubled braces (`{{"name": <function-name>, ...}}`:
# inside a Jinja string, `{{` is not an expression), and its models copy them; Qwen3's does not.
_DOUBLED_EXAMPLE = re.compile(r'\{\{\s*\\?"name\\?"\s*:\s*<function-name>')


def teaches_doubled_braces(template: str | None) -> bool:
    """Whether the template is a Hermes one whose tool instructions show the call object in
    doubled braces, so its models may write calls so (ToolCallReader reads them then)."""
    return family_of(template) is ToolFamily.HERMES and _DOUBLED_EXAMPLE.search(template or "") is not None


NOTE_INVALID = "\n[Kestrel: the model wrote a tool call that is not valid JSON; shown as text]"
NOTE_CUT_OFF = "\n[Kestrel: the answer ended inside a tool call; shown as text]"


def note_unknown(names: Sequence[str]) -> str:
    """The note after a call to a tool the model was not given (it may have made the name up)."""
    listed = ", ".join(f'"{name}"' for name in names)
    which = "which is not one of the tools" if len(names) == 1 else "which are not among the tools"
    return f"\n[Kestrel: the model called {listed}, {which} it was given; shown as text]"


class ToolCallReader:
    """Splits one answer's streamed text into text to show and the tool calls it makes.

    Text that could still be the start of a call marker is held back only until it can no
    longer become one, so ordinary text streams as it comes. Whitespace between text and a
    call is dropped (an answer that calls a tool has no trailing blank lines to show).
    """

    def __init__(self, family: ToolFamily, tool_names: Collection[str], *, doubled_braces: bool = False) -> None:
        # doubled_braces: the template teaches `{{"name": ...}}` (teaches_doubled_braces), read as a call too
        doubled = doubled_braces and family is ToolFamily.HERMES
        self._syntax = SYNTAXES["hermes_doubled" if doubled else family.value]
        self._names = frozenset(tool_names)
        self._buffer = ""
        self._in_block = False
        self._bare_ok = self._syntax.bare_json  # only at the start, and after a bare call
        self._index = 0
        self._blocks = 0  # call blocks opened so far: tells one open call from the next
        self._pending_space = ""
        self._after_call = False
        self._out: list[str | ToolCall] = []

    def feed(self, piece: str) -> list[str | ToolCall]:
        """Text to show now and calls completed; text that may be the start of a call is held back."""
        self._buffer += piece
        return self._drain(final=False)

    def finish(self) -> list[str | ToolCall]:
        """At the end: what was held back. A call that does not parse (or names an unknown tool)
        comes back as text followed by a note line, never dropped."""
        self._drain(final=True)
        if self._pending_space:
            self._show(self._pending_space)
            self._pending_space = ""
        return self._out

    def open_call(self) -> OpenCall | None:
        """The call block opened and not yet closed, as written so far (its opening marker
        first); None outside one. What must follow it is app/engine/backends/llama/tool_call_rest.py's."""
        return OpenCall(self._blocks, self._buffer) if self._in_block else None

    def _drain(self, final: bool) -> list[str | ToolCall]:
        self._out = []
        while self._buffer:
            if self._in_block:
                block = self._syntax.read(self._buffer, final)
                if block is None:
                    break
                self._take(block)
            elif not self._start_block(final):
                break
        return self._out

    def _start_block(self, final: bool) -> bool:
        """Passes on the text before the next call marker; False when the rest must wait."""
        if self._bare_ok:
            rest = self._buffer.lstrip().lstrip(";").lstrip() if self._after_call else self._buffer.lstrip()
            if not rest and not final:
                return False
            if rest.startswith("{"):
                if not self._after_call:  # the `;` between calls goes; blank lines wait for what follows
                    self._text(self._buffer[:len(self._buffer) - len(rest)])
                self._buffer, self._in_block = rest, True
                self._blocks += 1
                return True
            self._bare_ok = False
        found = [(at, opener) for opener in self._syntax.openers if (at := self._buffer.find(opener)) >= 0]
        if found:
            at = min(found)[0]
            self._text(self._buffer[:at])
            self._buffer, self._in_block = self._buffer[at:], True
            self._blocks += 1
            return True
        held = 0 if final else _partial_marker(self._buffer, self._syntax.openers)
        self._text(self._buffer[:len(self._buffer) - held])
        self._buffer = self._buffer[len(self._buffer) - held:]
        return False

    def _take(self, block: Block) -> None:
        original, self._buffer = self._buffer[:block.end], self._buffer[block.end:]
        self._in_block = False
        self._bare_ok = False
        if block.problem is Problem.NOT_A_CALL:
            self._text(original)
        elif block.problem is not None:
            self._text(original + (NOTE_CUT_OFF if block.problem is Problem.CUT_OFF else NOTE_INVALID))
        elif not all(isinstance(call.arguments, dict) for call in block.calls):
            self._text(original + NOTE_INVALID)
        elif unknown := [call.name for call in block.calls if call.name not in self._names]:
            self._text(original + note_unknown(unknown))
        else:
            for call in block.calls:
                self._call(call)
            self._bare_ok = self._syntax.bare_json  # Llama 3 may go on: `; {"name": ...}`

    def _call(self, call: RawCall) -> None:
        arguments = json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":"))
        self._out.append(ToolCall(self._index, "call_" + secrets.token_urlsafe(18), call.name, arguments))
        self._index += 1
        self._pending_space, self._after_call = "", True

    def _text(self, text: str) -> None:
        if self._after_call:
            text = text.lstrip()
            if not text:
                return
            self._after_call = False
        text = self._pending_space + text
        shown = text.rstrip()
        self._pending_space = text[len(shown):]
        if shown:
            self._show(shown)

    def _show(self, text: str) -> None:
        if self._out and isinstance(self._out[-1], str):
            self._out[-1] += text
        else:
            self._out.append(text)


def _partial_marker(text: str, openers: Sequence[str]) -> int:
    """Length of the longest end of text that is the beginning of a marker (so may become one)."""
    longest = 0
    for opener in openers:
        for size in range(min(len(opener) - 1, len(text)), longest, -1):
            if opener.startswith(text[-size:]):
                longest = size
                break
    return longest
