"""`kestrel export` and `kestrel import`: a saved chat to a Markdown or JSON file, and back."""

from __future__ import annotations

import argparse
import asyncio
import errno
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from app.cli.closed_output import end_quietly, output_closed
from app.cli.terminal_text import terminal_line, terminal_text
from app.core.store.history import HistoryError
from app.core.paths import data_paths
from app.library.models import ModelLibrary
from app.service.chats.chat_files import ExportOutcome
from app.service.doors.history import ChatFilesDoor
from app.service.events import Event, Problem
from app.service.models.client import EngineClient
from app.service.root import Service

EXIT_OK = 0
EXIT_USAGE = 2  # no such chat; -o names a file there (without --force), a link, a device, a folder, no folder
EXIT_NOT_A_CHAT = 3  # the file to import is no Kestrel chat export (missing, not JSON, damaged, too big)
EXIT_NOT_DONE = 7  # the disk or the history refused, or standard output was full or closed


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = commands.add_parser("export", help="write a saved chat to a Markdown or JSON file "
                                                "(without CHAT-ID: list the chats and their ids)")
    export.add_argument("chat_id", metavar="CHAT-ID", type=int, nargs="?", help="the chat's id")
    export.add_argument("--format", choices=["markdown", "json"], default="markdown",
                        help="markdown to read or share; json to import back (default: markdown)")
    export.add_argument("-o", "--output", type=Path, metavar="FILE",
                        help="the file to write (default: standard output); its folder must exist")
    export.add_argument("--force", action="store_true",
                        help="replace FILE if it is there (it keeps its permissions); never a link or a device")
    export.set_defaults(run=run_export)
    imported = commands.add_parser("import", help="add a chat exported as JSON to your chats")
    imported.add_argument("file", metavar="FILE", type=Path, help="a JSON export (kestrel export --format json)")
    imported.set_defaults(run=run_import)


def run_export(args: argparse.Namespace) -> int:
    if args.output is None and sys.stdout is None:  # started with it closed (`>&-`): Python gives None
        what = "the list of chats" if args.chat_id is None else f"chat {args.chat_id}"
        how = "" if args.chat_id is None else " Write it to a file with -o FILE instead."
        print(f"kestrel: {what} was not exported: standard output is closed.{how}", file=sys.stderr)
        return EXIT_NOT_DONE
    if args.chat_id is None:
        return _with_chats(_list_chats)
    if args.output is None:
        return _with_chats(lambda files: _print_chat(files, args.chat_id, args.format))

    async def export(files: ChatFilesDoor) -> int:
        if not await _exists(files, args.chat_id):
            return EXIT_USAGE
        outcome = await files.export_conversation(args.chat_id, args.output, args.format, replace=args.force)
        if outcome is ExportOutcome.WRITTEN:
            print(terminal_text(f"Wrote chat {args.chat_id} to {args.output}."), file=sys.stderr)
            return EXIT_OK
        if outcome is ExportOutcome.EXISTS:
            print("kestrel: add --force to replace it, or name another file with -o.", file=sys.stderr)
        return EXIT_USAGE if outcome in (ExportOutcome.EXISTS, ExportOutcome.REFUSED) else EXIT_NOT_DONE

    return _with_chats(export)


def run_import(args: argparse.Namespace) -> int:
    async def import_(files: ChatFilesDoor) -> int:
        imported = await files.import_file(args.file)
        if imported.chat_id is None:
            return EXIT_NOT_A_CHAT if imported.file_refused else EXIT_NOT_DONE
        print(terminal_text(f"Imported {args.file} as chat {imported.chat_id}."), file=sys.stderr)
        return EXIT_OK

    return _with_chats(import_)


async def _list_chats(files: ChatFilesDoor) -> int:
    chats = await files.read_all()
    if not chats:
        print("No chats yet.", file=sys.stderr)
        return EXIT_OK
    listing = "".join(f"{chat.id:>6}  {time.strftime('%Y-%m-%d %H:%M', time.localtime(chat.updated))}  "
                      f"{terminal_line(chat.title)}\n" for chat in chats)
    failed = _write_out(listing)
    if failed is None:
        return EXIT_OK
    if output_closed(failed):
        return end_quietly()  # a reader that stopped early (`| head`) had what it wanted
    print(f"kestrel: the list of chats could not be written to standard output ({_why(failed)}).",
          file=sys.stderr)
    return EXIT_NOT_DONE


async def _print_chat(files: ChatFilesDoor, chat_id: int, fmt: str) -> int:
    """The export on standard output: as it is for a pipe or a file, with its control
    characters escaped for a terminal (a chat's text must not drive the terminal)."""
    if not await _exists(files, chat_id):
        return EXIT_USAGE
    text = await files.render(chat_id, fmt)
    if text is None:
        return EXIT_NOT_DONE
    failed = _write_out(terminal_text(text) if sys.stdout is not None and sys.stdout.isatty() else text)
    if failed is None:
        return EXIT_OK
    if output_closed(failed):
        return end_quietly()  # the reader stopped early (`| head`): it had what it wanted
    advice = "Write" if failed.errno == errno.EBADF else "Free some space, or write"
    print(f"kestrel: chat {chat_id} could not be written to standard output ({_why(failed)}). "
          f"{advice} it to a file with -o FILE.", file=sys.stderr)
    return EXIT_NOT_DONE


def _why(failed: OSError) -> str:
    if failed.errno == errno.EBADF:  # closed, or opened for reading only (`1<&0`)
        return "standard output is closed"
    return failed.strerror or str(failed)


def _write_out(text: str) -> OSError | None:
    """Write text to standard output; the error if it is full or closed (None: written).

    After an error standard output is pointed at the null device, so that Python's own
    flush at exit does not fail again and print a traceback.
    """
    if sys.stdout is None:
        return OSError(errno.EBADF, "standard output is closed")
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
        return exc
    return None


async def _exists(files: ChatFilesDoor, chat_id: int) -> bool:
    try:
        await files.get_conversation(chat_id)
    except KeyError:
        print(f"kestrel: there is no chat {chat_id}. `kestrel export` without an id lists the chats.",
              file=sys.stderr)
        return False
    return True


def _with_chats(work: Callable[[ChatFilesDoor], Awaitable[int]]) -> int:
    """Run work over the user's history (no model is loaded); problems go to standard error."""
    async def main() -> int:
        paths = data_paths().ensure()
        service = Service(history_path=paths.history_db, settings_path=None, library=ModelLibrary(paths.models),
                          client=EngineClient())
        files = ChatFilesDoor(service)
        service.subscribe(_print_problem)
        try:
            await service.open()
            if files.history_damage is not None:
                print(f"kestrel: {files.history_damage} Open Kestrel's window to choose.", file=sys.stderr)
                return EXIT_NOT_DONE
            return await work(files)
        finally:
            await service.shutdown()

    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(encoding="utf-8", errors="replace")
    try:
        return asyncio.run(main())
    except HistoryError as exc:
        print(f"kestrel: {exc}", file=sys.stderr)
        return EXIT_NOT_DONE


def _print_problem(event: Event) -> None:
    if isinstance(event, Problem):
        print(terminal_text(f"kestrel: {event.text}"), file=sys.stderr)
