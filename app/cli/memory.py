"""`kestrel memory`: add, list, remove and clear the facts Kestrel remembers about you (kept in your chat history's file)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable

from app.cli.chat_input import argument_text, stdin_text
from app.cli.history_command import said, with_history_door
from app.cli.terminal_text import terminal_line
from app.cli.user_error import EXIT_OK, EXIT_USAGE, UserError
from app.core.memories import MAX_MEMORY_CHARS, Memory, MemoryOrigin, MemoryRefused, RefusalReason
from app.service.doors.memory import MemoryDoor

# Standard input read for `add -`: far past a memory's limit, so a longer one is refused in words,
# never read whole (a file of gigabytes piped in by mistake).
_STDIN_BYTES = 16 * MAX_MEMORY_CHARS * 4
_EXAMPLE = "kestrel memory add \"My daughter is called Ada.\""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    memory = commands.add_parser("memory", help="the facts Kestrel remembers about you: add, list, remove, clear")
    actions = memory.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="remember a fact (every new chat is given the facts that matter to it)")
    add.add_argument("text", metavar="TEXT", nargs="+", help="the fact, in a sentence; - reads standard input")
    add.set_defaults(run=run, handler=_add)
    listing = actions.add_parser("list", help="every remembered fact with its id")
    listing.add_argument("--json", action="store_true", help="one JSON object per memory and line")
    listing.set_defaults(run=run, handler=_list)
    remove = actions.add_parser("remove", help="forget one fact (`list` shows the ids)")
    remove.add_argument("id", metavar="ID", type=int)
    remove.set_defaults(run=run, handler=_remove)
    clear = actions.add_parser("clear", help="forget every fact")
    clear.add_argument("--yes", action="store_true", help="do not ask first")
    clear.set_defaults(run=run, handler=_clear)


def run(args: argparse.Namespace) -> int:
    """Run the chosen action over the history's memories (no model is loaded)."""
    handler: Callable[[argparse.Namespace, MemoryDoor], Awaitable[int]] = args.handler
    return said(lambda: asyncio.run(with_history_door(MemoryDoor, "memories", lambda door: handler(args, door))))


# --- the actions ---------------------------------------------------------------------------


async def _add(args: argparse.Namespace, door: MemoryDoor) -> int:
    text = _read_stdin() if args.text == ["-"] else argument_text(" ".join(args.text), "The memory")
    try:
        added = await door.add(text, MemoryOrigin.CLI)
    except MemoryRefused as exc:
        how = " `kestrel memory list` shows them; `kestrel memory remove ID` forgets one." \
            if exc.reason is RefusalReason.FULL else ""
        raise UserError(f"{exc}{how}", EXIT_USAGE) from None
    said = "Remembered" if added.new else "Already remembered"
    print(f"{said} (memory {added.memory.id}): {terminal_line(added.memory.text)}")
    return EXIT_OK


def _read_stdin() -> str:
    if sys.stdin is None:
        raise UserError("There is no standard input to read the memory from (-). Give it after add instead.",
                        EXIT_USAGE)
    buffer = getattr(sys.stdin, "buffer", None)
    text = stdin_text(buffer.read(_STDIN_BYTES)) if buffer is not None else sys.stdin.read(_STDIN_BYTES)
    if len(text) >= _STDIN_BYTES // 4:  # a UTF-8 character takes at most 4 bytes: this is past any memory
        raise UserError(f"Standard input held more than {len(text):,} characters; a memory holds at most "
                        f"{MAX_MEMORY_CHARS:,}. Keep one short fact per memory, such as \"I prefer short answers.\"",
                        EXIT_USAGE)
    return text


async def _list(args: argparse.Namespace, door: MemoryDoor) -> int:
    memories = await door.listing()
    if not memories and not args.json:
        print(f"Kestrel remembers nothing yet. Add a fact with: {_EXAMPLE}", file=sys.stderr)
    width = max((len(str(memory.id)) for memory in memories), default=1)
    for memory in memories:
        if args.json:
            print(json.dumps(memory.to_dict(), ensure_ascii=False))
        else:
            off = "  (off: not used)" if not memory.enabled else ""
            print(f"{memory.id:>{width}}  {_day(memory.created)}  {_origin(memory):<16}  "
                  f"{terminal_line(memory.text)}{off}")
    return EXIT_OK


def _day(created: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(created))


def _origin(memory: Memory) -> str:
    """Where it came from, in a few words."""
    chat = f"chat {memory.conversation_id}" if memory.conversation_id is not None else "a chat"
    return {MemoryOrigin.HAND: "by hand", MemoryOrigin.CLI: "kestrel memory", MemoryOrigin.TOOL: f"asked in {chat}",
            MemoryOrigin.MESSAGE: f"from {chat}", MemoryOrigin.PROPOSED: f"proposed in {chat}"}[memory.origin]


async def _remove(args: argparse.Namespace, door: MemoryDoor) -> int:
    memory = next((m for m in await door.listing() if m.id == args.id), None)
    if memory is None or not await door.remove(args.id):
        raise UserError(f"There is no memory {args.id}. `kestrel memory list` shows the ids.", EXIT_USAGE)
    print(f"Forgot memory {memory.id}: {terminal_line(memory.text)}")
    print("kestrel: saved chat states were cleared too, so none still holds it.", file=sys.stderr)
    return EXIT_OK


async def _clear(args: argparse.Namespace, door: MemoryDoor) -> int:
    count = len(await door.listing())
    if count == 0:
        print("Kestrel remembers nothing; there is nothing to clear.", file=sys.stderr)
        return EXIT_OK
    if not args.yes and not await asyncio.to_thread(_agreed, count):
        print("Nothing was forgotten.", file=sys.stderr)
        return EXIT_USAGE
    forgotten = await door.clear()
    print(f"Forgot {_all(forgotten)}; saved chat states were cleared too.")
    return EXIT_OK


def _all(count: int) -> str:
    return "the one memory" if count == 1 else f"all {count:,} memories"


def _agreed(count: int) -> bool:
    if sys.stdin is None or not sys.stdin.isatty():
        raise UserError(f"This would forget {_all(count)}. Run it again with --yes to do so.", EXIT_USAGE)
    print(f"Forget {_all(count)}? [y/N] ", end="", file=sys.stderr, flush=True)
    try:
        return input().strip().lower() in ("y", "yes")
    except EOFError:
        return False

