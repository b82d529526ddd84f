"""`kestrel projects`: list, add, show, edit and remove projects, move chats in and out, export and import a project whole."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from app.cli.chat_input import argument_text, stdin_text
from app.cli.chat_tools import ToolFlagError, checked_servers, names
from app.cli.history_command import EXIT_NOT_DONE, said, with_history_door
from app.cli.terminal_text import shown_path, terminal_line, terminal_text
from app.cli.user_error import EXIT_OK, EXIT_USAGE, UserError
from app.core.paths import data_paths
from app.core.project_export import SUFFIX, ProjectFileError
from app.core.projects import MAX_INSTRUCTIONS, Project, ProjectRefused
from app.core.store.history import HistoryError
from app.core.store.projects import ProjectChanges
from app.library.models import ModelLibrary
from app.library.servers.book import ServerBook
from app.service.doors.projects import ProjectsDoor

EXIT_FILE = 8  # the project file could not be read, imported or written
# An --instructions-file or standard input read past this is refused in words, never read whole.
_READ_BYTES = 8 * MAX_INSTRUCTIONS
T = TypeVar("T")
_EXAMPLE = "kestrel projects add Garden --instructions \"Answer as a gardening expert.\""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    projects = commands.add_parser("projects", help="groups of chats with their own instructions, model, tools "
                                                    "and collections: list, add, show, edit, remove, move, export, import")
    actions = projects.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="every project with how many chats it holds")
    listing.add_argument("--json", action="store_true", help="one JSON object per project and line")
    listing.set_defaults(run=run, handler=_list)
    add = actions.add_parser("add", help="make a project; `kestrel chat --project NAME` then chats in it")
    add.add_argument("name", metavar="NAME")
    _add_fields(add)
    add.set_defaults(run=run, handler=_add)
    show = actions.add_parser("show", help="a project's instructions, model, tools, collections and chats")
    show.add_argument("name", metavar="NAME")
    show.add_argument("--json", action="store_true", help="one JSON object, with its chats")
    show.set_defaults(run=run, handler=_show)
    edit = actions.add_parser("edit", help="change a project (its chats keep what they started with)")
    edit.add_argument("name", metavar="NAME")
    edit.add_argument("--name", dest="new_name", metavar="NEW", help="rename it")
    _add_fields(edit)
    edit.add_argument("--default-model", action="store_true", help="its chats answer with the default model")
    edit.add_argument("--no-docs", action="store_true", help="its chats answer from no collection")
    edit.add_argument("--memory", action="store_true", default=None, help="its new chats use your memories")
    edit.set_defaults(run=run, handler=_edit)
    remove = actions.add_parser("remove", help="remove a project; its chats are kept, in no project")
    remove.add_argument("name", metavar="NAME")
    remove.set_defaults(run=run, handler=_remove)
    move = actions.add_parser("move", help="put a chat in a project, or with --none take it out of any")
    move.add_argument("chat", metavar="CHAT_ID", type=int, help="the chat's id (`kestrel export` lists them)")
    where = move.add_mutually_exclusive_group(required=True)
    where.add_argument("name", metavar="NAME", nargs="?")
    where.add_argument("--none", action="store_true", help="in no project")
    move.set_defaults(run=run, handler=_move)
    export = actions.add_parser("export", help=f"write a project and all its chats to a {SUFFIX} file")
    export.add_argument("name", metavar="NAME")
    export.add_argument("file", metavar="FILE", type=Path)
    export.add_argument("--force", action="store_true", help="replace FILE if it is there; never a link or a device")
    export.set_defaults(run=run, handler=_export)
    imported = actions.add_parser("import", help=f"add the project in a {SUFFIX} file, with its chats")
    imported.add_argument("file", metavar="FILE", type=Path)
    imported.set_defaults(run=run, handler=_import)


def _add_fields(parser: argparse.ArgumentParser) -> None:
    text = parser.add_mutually_exclusive_group()
    text.add_argument("--instructions", metavar="TEXT",
                      help="what every new chat in it is told first (its system prompt); - reads standard input")
    text.add_argument("--instructions-file", metavar="FILE", type=Path, help="the instructions from a UTF-8 file")
    parser.add_argument("--model", metavar="MODEL", help="an installed model's id (`kestrel models list`) or SERVER/MODEL")
    parser.add_argument("--tools", metavar="SERVER,…", help="offer its chats the tools of these MCP servers")
    parser.add_argument("--docs", action="append", metavar="COLLECTION",
                        help="its chats answer from this collection (`kestrel docs list`); repeat for more")
    parser.add_argument("--no-memory", dest="no_memory", action="store_true",
                        help="its new chats do not use your memories")


def run(args: argparse.Namespace) -> int:
    """Run the chosen action over the history's projects (no model is loaded)."""
    handler: Callable[[argparse.Namespace, ProjectsDoor], Awaitable[int]] = args.handler
    return said(lambda: asyncio.run(_with_projects(lambda door: handler(args, door))))


async def _with_projects(work: Callable[[ProjectsDoor], Awaitable[T]]) -> T:
    async def refused_in_words(door: ProjectsDoor) -> T:
        try:
            return await work(door)
        except ProjectRefused as exc:
            raise UserError(str(exc), EXIT_USAGE) from None
        except ProjectFileError as exc:
            raise UserError(str(exc), EXIT_FILE) from None

    return await with_history_door(ProjectsDoor, "projects", refused_in_words)


def project_for_chat(name: str) -> Project:
    """`kestrel chat --project NAME`'s project; UserError (its status) if there is none or the history will not do."""
    try:
        return asyncio.run(_with_projects(lambda door: named(door, name)))
    except HistoryError as exc:
        raise UserError(str(exc), EXIT_NOT_DONE) from None


async def named(door: ProjectsDoor, name: str) -> Project:
    """The project called `name`, or UserError listing those there are."""
    project = await door.find(argument_text(name, "The project's name"))
    if project is None:
        known = [p.name for p in await door.listing()]
        have = f"The projects are: {', '.join(known)}." if known else f"There are none yet; make one with: {_EXAMPLE}"
        raise UserError(f"There is no project called \"{terminal_line(name)}\". {have}", EXIT_USAGE)
    return project


# --- the actions ---------------------------------------------------------------------------


async def _list(args: argparse.Namespace, door: ProjectsDoor) -> int:
    projects = await door.listing()
    if not projects and not args.json:
        print(f"There are no projects yet. Make one with: {_EXAMPLE}", file=sys.stderr)
    for project in projects:
        chats = len(await door.chats(project.id))
        if args.json:
            print(json.dumps({**project.to_dict(), "chats": chats}, ensure_ascii=False))
        else:
            print(f"{terminal_line(project.name)}  ({_count(chats, 'chat')}, model: {project.model or 'default'})")
    return EXIT_OK


async def _add(args: argparse.Namespace, door: ProjectsDoor) -> int:
    project = await door.add(argument_text(args.name, "The project's name"), _instructions(args) or "",
                             model=_model(args.model), tools=_tools(args.tools), collections=_collections(args.docs),
                             memory=not args.no_memory)
    print(f"Made project \"{terminal_line(project.name)}\". Chat in it with: kestrel chat --project "
          f"{_quoted(project.name)} \"…\"")
    return EXIT_OK


async def _show(args: argparse.Namespace, door: ProjectsDoor) -> int:
    project = await named(door, args.name)
    chats = await door.chats(project.id)
    if args.json:
        print(json.dumps({**project.to_dict(), "chats": [{"id": chat.id, "title": chat.title, "updated": chat.updated}
                                                         for chat in chats]}, ensure_ascii=False))
        return EXIT_OK
    print(f"Project: {terminal_line(project.name)}")
    print(f"Model: {project.model or 'the default model'}")
    print(f"Tools: {', '.join(project.tools) or 'none'}")
    print(f"Collections: {', '.join(project.collections) or 'none'}")
    print(f"Memory: {'used' if project.memory else 'not used'}")
    print("Instructions:" + ("\n" + terminal_text(project.instructions) if project.instructions else " none"))
    print(f"Chats: {len(chats)}")
    for chat in chats:
        print(f"  {chat.id}  {_day(chat.updated)}  {terminal_line(chat.title)}")
    return EXIT_OK


async def _edit(args: argparse.Namespace, door: ProjectsDoor) -> int:
    project = await named(door, args.name)
    if args.model and args.default_model:
        raise UserError("Give --model or --default-model, not both.", EXIT_USAGE)
    if args.docs and args.no_docs:
        raise UserError("Give --docs or --no-docs, not both.", EXIT_USAGE)
    if args.no_memory and args.memory:
        raise UserError("Give --memory or --no-memory, not both.", EXIT_USAGE)
    changes = ProjectChanges(
        name=None if args.new_name is None else argument_text(args.new_name, "The new name"),
        instructions=_instructions(args), model="" if args.default_model else _model(args.model),
        tools=None if args.tools is None else _tools(args.tools),
        collections=() if args.no_docs else None if args.docs is None else _collections(args.docs),
        memory=False if args.no_memory else args.memory)
    if changes == ProjectChanges():
        raise UserError("Nothing to change: give --name, --instructions, --model, --tools (\"\" for none), --docs, "
                        "--no-docs, --memory or --no-memory.", EXIT_USAGE)
    edited = await door.edit(project.id, changes)
    print(f"Changed project \"{terminal_line(edited.name)}\"; its new chats start with the change (its chats "
          "keep what they started with).")
    return EXIT_OK


async def _remove(args: argparse.Namespace, door: ProjectsDoor) -> int:
    project = await named(door, args.name)
    freed = await door.remove(project.id)
    kept = f"; its {_count(len(freed), 'chat')} {'is' if len(freed) == 1 else 'are'} kept, in no project" \
        if freed else ""
    print(f"Removed project \"{terminal_line(project.name)}\"{kept}.")
    return EXIT_OK


async def _move(args: argparse.Namespace, door: ProjectsDoor) -> int:
    project = None if args.none else await named(door, args.name)
    try:
        chat = await door.move(args.chat, None if project is None else project.id)
    except KeyError:
        raise UserError(f"There is no chat {args.chat}. `kestrel export` lists the chats and their ids.",
                        EXIT_USAGE) from None
    where = "in no project" if project is None else f"in project \"{terminal_line(project.name)}\""
    print(f"Chat {chat.id} (\"{terminal_line(chat.title)}\") is now {where}.")
    return EXIT_OK


async def _export(args: argparse.Namespace, door: ProjectsDoor) -> int:
    project = await named(door, args.name)
    path = args.file.expanduser().absolute()
    count = await door.export(project.id, path, replace=args.force)
    print(f"Wrote project \"{terminal_line(project.name)}\" and its {_count(count, 'chat')} to {shown_path(path)}")
    return EXIT_OK


async def _import(args: argparse.Namespace, door: ProjectsDoor) -> int:
    path = args.file.expanduser().absolute()
    imported = await door.import_file(path)
    print(f"Imported project \"{terminal_line(imported.project.name)}\" with "
          f"{_count(len(imported.chat_ids), 'chat')} from {shown_path(path)}")
    if imported.left_out:
        print(f"kestrel: {terminal_text(imported.left_out)}", file=sys.stderr)
    return EXIT_OK


# --- the flags -----------------------------------------------------------------------------


def _instructions(args: argparse.Namespace) -> str | None:
    """--instructions (- reads standard input) or --instructions-file; None when neither was given."""
    if args.instructions_file is not None:
        path = args.instructions_file.expanduser()
        try:
            with path.open("rb") as file:
                return _bounded(file.read(_READ_BYTES), f"{shown_path(path)}")
        except OSError as exc:
            raise UserError(f"{shown_path(path)} could not be read ({exc.strerror or exc}).", EXIT_USAGE) from None
    if args.instructions == "-":
        buffer = getattr(sys.stdin, "buffer", None) if sys.stdin is not None else None
        if buffer is None:
            raise UserError("There is no standard input to read the instructions from (-).", EXIT_USAGE)
        return _bounded(buffer.read(_READ_BYTES), "Standard input")
    return None if args.instructions is None else argument_text(args.instructions, "The instructions")


def _bounded(data: bytes, what: str) -> str:
    if len(data) >= _READ_BYTES:
        raise UserError(f"{what} holds more than {_READ_BYTES:,} bytes; a project's instructions hold at most "
                        f"{MAX_INSTRUCTIONS:,} characters. Shorten them.", EXIT_USAGE)
    try:
        return stdin_text(data)
    except UserError as exc:
        raise UserError(f"{what}: {exc}", exc.status) from None


def _model(given: str | None) -> str | None:
    """--model as the id of an installed model or a server's model; UserError for one that is neither."""
    if given is None:
        return None
    paths = data_paths()
    found = ModelLibrary(paths.models).find(given) or ServerBook.at(paths).chat_model(given)
    if found is None:
        raise UserError(f"There is no installed model \"{terminal_line(given)}\". `kestrel models list` shows "
                        "the models and their ids.", EXIT_USAGE)
    return found.id


def _tools(given: str | None) -> tuple[str, ...]:
    try:
        return checked_servers(names(given))
    except ToolFlagError as exc:
        raise UserError(str(exc), EXIT_USAGE) from None


def _collections(given: list[str] | None) -> tuple[str, ...]:
    if not given:
        return ()
    from app.cli.chat_documents import DocumentsRefused, chat_documents

    try:
        documents = chat_documents((), given)
    except DocumentsRefused as exc:
        raise UserError(str(exc), exc.status) from None
    if documents.index is not None:
        documents.index.close()
    return documents.collections


def _count(number: int, thing: str) -> str:
    return f"{number:,} {thing}" + ("" if number == 1 else "s")


def _quoted(name: str) -> str:
    return name if name.replace("-", "").replace("_", "").isalnum() else f"\"{terminal_line(name)}\""


def _day(epoch: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(epoch))
