"""`kestrel chat --tools`: which servers' tools, who approves each call, and how calls are printed."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from typing import TextIO

from app.cli.terminal_text import terminal_line
from app.cli.thinking_output import write
from app.core.conversation import Part, ToolCallPart, ToolResultPart
from app.core.paths import data_paths
from app.service.events import ToolPartsChanged
from app.service.tools.tool_use import Approver, ToolDecision, ToolRequest
from app.tools.mcp_config import read_mcp_config
from app.tools.result_cut import cut_of

EXIT_USAGE = 2
_SHOWN = 300  # characters of a result shown on a terminal (the model gets it whole)


class ToolFlagError(Exception):
    """--tools or --allow-tools named something that is not there; the message says what is."""


def names(value: str | None) -> tuple[str, ...]:
    """A comma-separated flag's names, without blanks and repeats, in order."""
    seen: dict[str, None] = {}
    for name in (value or "").split(","):
        if name.strip():
            seen[name.strip()] = None
    return tuple(seen)


def checked_servers(asked: tuple[str, ...]) -> tuple[str, ...]:
    """--tools: servers in mcp.json, or ToolFlagError naming the unknown ones and the known."""
    if not asked:
        return ()
    path = data_paths().mcp_file
    servers, problems = read_mcp_config(path)
    known = [server.name for server in servers if server.enabled]
    unknown = [name for name in asked if name not in known]
    if unknown:
        have = f"the servers there: {', '.join(known)}" if known else "there are none yet"
        why = f" ({'; '.join(problems)})" if problems else ""
        raise ToolFlagError(f"--tools: {', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not an "
                            f"enabled server in {path}{why}; {have}. Add one with `kestrel tools add`.")
    return asked


def approver(allowed: tuple[str, ...], *, can_ask: bool, ask: Callable[[str], str] = input) -> Approver:
    """Calls named in --allow-tools (a tool, or server/tool) run; others are asked on the
    terminal when there is one to ask on, and denied (saying how to allow them) otherwise."""

    async def decide(request: ToolRequest) -> ToolDecision:
        if request.tool in allowed or f"{request.server}/{request.tool}" in allowed:
            return ToolDecision.ALLOW_ONCE
        if not can_ask:
            print(f"kestrel: the model called {request.tool} ({request.server}); it was not run, since no one "
                  f"could be asked. Pass --allow-tools {request.tool} to allow it.", file=sys.stderr, flush=True)
            return ToolDecision.DENY
        # Kestrel's own tool says what it will do (Remember "…"); a server's shows its call as made.
        asked = request.summary or f"Run {request.tool} ({request.server}) with {request.arguments}"
        question = f"{terminal_line(asked)}? [y] once, [a] always, [N] no: "
        answer = (await asyncio.to_thread(_asked, ask, question)).strip().lower()
        return {"y": ToolDecision.ALLOW_ONCE, "yes": ToolDecision.ALLOW_ONCE,
                "a": ToolDecision.ALWAYS, "always": ToolDecision.ALWAYS}.get(answer, ToolDecision.DENY)

    return decide


def _asked(ask: Callable[[str], str], question: str) -> str:
    print(question, end="", file=sys.stderr, flush=True)
    try:
        return ask("")
    except EOFError:
        return ""


class ToolPrinter:
    """Prints each call as it is made and each result as it comes: JSON lines under --json
    (tool_call, tool_result), otherwise a line each on standard error, beside the answer."""

    def __init__(self, out: TextIO, as_json: bool) -> None:
        self._out, self._as_json = out, as_json
        self._shown = 0

    def show(self, event: ToolPartsChanged) -> None:
        for part in event.parts[self._shown:]:
            self._part(part)
        self._shown = len(event.parts)

    def _part(self, part: Part) -> None:
        if isinstance(part, ToolCallPart):
            if self._as_json:
                write(self._out, {"type": "tool_call", "id": part.call_id, "server": part.server, "name": part.name,
                                  "arguments": json.loads(part.arguments or "{}")}, True)
            else:
                print(f"\n→ {part.name} ({part.server or 'no such tool'}) {part.arguments}", file=sys.stderr,
                      flush=True)
        elif isinstance(part, ToolResultPart):
            if self._as_json:
                write(self._out, {"type": "tool_result", "id": part.call_id, "text": part.text,
                                  "is_error": part.is_error, "denied": part.denied}, True)
            else:
                said = "denied" if part.denied else "error" if part.is_error else "result"
                cut = cut_of(part.text)
                if cut is not None:  # the note is at the end, past what the terminal is shown
                    said += f", cut to {cut.kept:,} of {cut.total:,} characters {cut.reason.value}"
                text = part.text if len(part.text) <= _SHOWN else part.text[:_SHOWN] + "…"
                print(f"← {said}: {text}", file=sys.stderr, flush=True)
