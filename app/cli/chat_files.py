"""`kestrel export` and `kestrel import`: a saved chat to a Markdown or JSON file, and back."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from app.core.history import HistoryError
from app.core.paths import data_paths
from app.library.models import ModelLibrary
from app.service.client import EngineClient
from app.service.controller import ChatController
from app.service.events import Event, Problem

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = commands.add_parser("export", help="write a saved chat to a Markdown or JSON file "
                                                "(without CHAT-ID: list the chats and their ids)")
    export.add_argument("chat_id", metavar="CHAT-ID", type=int, nargs="?", help="the chat's id")
    export.add_argument("--format", choices=["markdown", "json"], default="markdown",
                        help="markdown to read or share; json to import back (default: markdown)")
    export.add_argument("-o", "--output", type=Path, metavar="FILE",
                        help="the file to write (default: standard output)")
    export.set_defaults(run=run_export)
    imported = commands.add_parser("import", help="add a chat exported as JSON to your chats")
    imported.add_argument("file", metavar="FILE", type=Path, help="a JSON export (kestrel export --format json)")
    imported.set_defaults(run=run_import)


def run_export(args: argparse.Namespace) -> int:
    if args.chat_id is None:
        return _with_controller(_list_chats)
    if args.output is None:
        return _with_controller(lambda controller: _print_chat(controller, args.chat_id, args.format))

    async def export(controller: ChatController) -> int:
        if not await _exists(controller, args.chat_id):
            return EXIT_USAGE
        done = await controller.export_conversation(args.chat_id, args.output, args.format)
        if done:
            print(f"Wrote chat {args.chat_id} to {args.output}.", file=sys.stderr)
        return EXIT_OK if done else EXIT_FAILED

    return _with_controller(export)


def run_import(args: argparse.Namespace) -> int:
    async def import_(controller: ChatController) -> int:
        new_id = await controller.import_conversation(args.file)
        if new_id is None:
            return EXIT_FAILED
        print(f"Imported {args.file} as chat {new_id}.", file=sys.stderr)
        return EXIT_OK

    return _with_controller(import_)


async def _list_chats(controller: ChatController) -> int:
    chats = await controller.conversations.read_all()
    if not chats:
        print("No chats yet.", file=sys.stderr)
    for chat in chats:
        print(f"{chat.id:>6}  {time.strftime('%Y-%m-%d %H:%M', time.localtime(chat.updated))}  {chat.title}")
    return EXIT_OK


async def _print_chat(controller: ChatController, chat_id: int, fmt: str) -> int:
    """The export on standard output, for a pipe (written through a temporary file, as to any file)."""
    import tempfile

    if not await _exists(controller, chat_id):
        return EXIT_USAGE
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "chat"
        if not await controller.export_conversation(chat_id, path, fmt):
            return EXIT_FAILED
        sys.stdout.write(path.read_text(encoding="utf-8"))
    return EXIT_OK


async def _exists(controller: ChatController, chat_id: int) -> bool:
    try:
        await controller.conversations.get(chat_id)
    except KeyError:
        print(f"kestrel: there is no chat {chat_id}. `kestrel export` without an id lists the chats.",
              file=sys.stderr)
        return False
    return True


def _with_controller(work: Callable[[ChatController], Awaitable[int]]) -> int:
    """Run work over the user's history (no model is loaded); problems go to standard error."""
    async def main() -> int:
        paths = data_paths().ensure()
        controller = ChatController(history_path=paths.history_db, settings_path=None,
                                    library=ModelLibrary(paths.models), client=EngineClient())
        controller.subscribe(_print_problem)
        try:
            await controller.open()
            if controller.history_damage is not None:
                print(f"kestrel: {controller.history_damage} Open Kestrel's window to choose.", file=sys.stderr)
                return EXIT_FAILED
            return await work(controller)
        finally:
            await controller.shutdown()

    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(encoding="utf-8", errors="replace")
    try:
        return asyncio.run(main())
    except HistoryError as exc:
        print(f"kestrel: {exc}", file=sys.stderr)
        return EXIT_FAILED


def _print_problem(event: Event) -> None:
    if isinstance(event, Problem):
        print(f"kestrel: {event.text}", file=sys.stderr)
