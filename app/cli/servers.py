"""`kestrel servers`: add, list, remove and find servers whose models Kestrel can chat with, and list their models.

A server is contacted only by `add` (to check it answers, unless --no-check), `models` and `find`
(which asks this PC's usual ports, nothing else); `list` and `remove` read and write files only.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from app.cli.terminal_text import terminal_line
from app.cli.user_error import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UserError
from app.core.paths import data_paths
from app.library.servers.book import ServerBook
from app.library.servers.faults import ServerFault
from app.library.servers.finding import find_on_this_pc
from app.library.servers.records import DEFAULT_WAIT_S, RemoteModel, ServerKind
from app.library.servers.server_list import ServerListError

EXIT_SERVER = 7  # `models`: the server did not list its models (down, refused, wrong key, …): as a download that failed
MAX_KEY_CHARS = 4096


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    servers = commands.add_parser("servers", help="add, list, remove or find servers whose models you can chat with")
    actions = servers.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="add a server: NAME URL (then chat with --model NAME/MODEL)")
    add.add_argument("name", metavar="NAME", help="what to call it (studio-pc); models are then named NAME/MODEL")
    add.add_argument("url", metavar="URL", help="its address, such as http://192.168.1.20:11434")
    add.add_argument("--kind", choices=[kind.value for kind in ServerKind], default=ServerKind.OPENAI.value,
                     help="the API it speaks (default: openai, which LM Studio, llama-server and vLLM speak)")
    add.add_argument("--key-stdin", action="store_true", help="read its key from standard input (one line)")
    add.add_argument("--wait", type=float, default=DEFAULT_WAIT_S, metavar="S",
                     help=f"how long an answer waits for the server's next word (default {DEFAULT_WAIT_S:.0f})")
    add.add_argument("--no-check", action="store_true", help="do not contact it now to check that it answers")
    add.set_defaults(run=run, handler=_add)
    listing = actions.add_parser("list", help="the servers you added (contacts none)")
    listing.add_argument("--json", action="store_true", help="one JSON object per server and line")
    listing.set_defaults(run=run, handler=_list)
    remove = actions.add_parser("remove", help="forget a server and its key")
    remove.add_argument("name", metavar="NAME")
    remove.set_defaults(run=run, handler=_remove)
    key = actions.add_parser("key", help="set a server's key from standard input (an empty line forgets it)")
    key.add_argument("name", metavar="NAME")
    key.set_defaults(run=run, handler=_key)
    find = actions.add_parser("find", help="look for Ollama, LM Studio and llama-server on this PC's usual ports")
    find.add_argument("--json", action="store_true", help="one JSON object per server found and line")
    find.set_defaults(run=run, handler=_find)
    models = actions.add_parser("models", help="the models a server has (it is contacted)")
    models.add_argument("name", metavar="NAME")
    models.add_argument("--json", action="store_true", help="one JSON object per model and line")
    models.set_defaults(run=run, handler=_models)


def run(args: argparse.Namespace) -> int:
    try:
        status: int = args.handler(args, ServerBook.at(data_paths().ensure()))
        return status
    except UserError as exc:
        print(f"kestrel: {exc}", file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED


def _add(args: argparse.Namespace, book: ServerBook) -> int:
    key = _key_from_stdin() if args.key_stdin else None
    try:
        added = book.add(args.name, args.url, ServerKind(args.kind), key, wait_s=args.wait)
    except ValueError as exc:
        raise UserError(str(exc), EXIT_USAGE) from None
    except (ServerListError, OSError) as exc:
        raise UserError(f"The server was not added: {exc}", EXIT_USAGE) from None
    server = added.server
    print(f"Added {terminal_line(server.name)}: {server.kind.described} at {server.url}.")
    if added.key is not None:
        print(added.key.words)
    if args.no_check:
        return EXIT_OK
    try:
        models = book.models(server.name)
    except ServerFault as fault:
        print(f"kestrel: it is added, but: {fault}", file=sys.stderr)
        return EXIT_OK
    names = ", ".join(terminal_line(m.name) for m in models[:5]) + (", …" if len(models) > 5 else "")
    print(f"It answers with {len(models)} model(s){': ' + names if models else ''}. Chat with one: "
          f"kestrel chat --model {_quoted(server.name)}/MODEL \"Hello\"")
    return EXIT_OK


def _list(args: argparse.Namespace, book: ServerBook) -> int:
    servers = book.list()
    if book.servers.last_problem:
        print(f"kestrel: {book.servers.last_problem}", file=sys.stderr)
    for server in servers:
        keyed = book.keys.get(server.name) is not None
        if args.json:
            print(json.dumps({"name": server.name, "kind": server.kind.value, "url": server.url, "key": keyed,
                              "wait_s": server.wait_s}, ensure_ascii=False))
        else:
            print("\t".join([terminal_line(server.name), server.kind.value, server.url, *([] if keyed else ["no key"])]))
    if not servers and not args.json:
        print("No servers are added. Add one with: kestrel servers add NAME URL [--kind ollama] "
              "(or look for some on this PC: kestrel servers find).", file=sys.stderr)
    return EXIT_OK


def _remove(args: argparse.Namespace, book: ServerBook) -> int:
    try:
        removed = book.remove(args.name)
    except (ServerListError, OSError) as exc:
        raise UserError(str(exc), EXIT_USAGE) from None
    if removed is None:
        raise UserError(f'No server called "{args.name}" is added (kestrel servers list shows them).', EXIT_USAGE)
    print(f"Removed {terminal_line(removed.name)} and its key.")
    return EXIT_OK


def _key(args: argparse.Namespace, book: ServerBook) -> int:
    key = _key_from_stdin()
    try:
        kept = book.set_key(args.name, key)
    except LookupError as exc:
        raise UserError(f"{exc} (kestrel servers list shows them)", EXIT_USAGE) from None
    except OSError as exc:
        raise UserError(f"The key could not be kept: {exc}", EXIT_USAGE) from None
    print(kept.words)
    return EXIT_OK


def _find(args: argparse.Namespace, book: ServerBook) -> int:
    found = find_on_this_pc()
    added = {server.url for server in book.list()}
    for server in found:
        if args.json:
            print(json.dumps({"name": server.name, "url": server.url, "kind": server.kind.value,
                              "program": server.program, "added": server.url in added}))
        elif server.url in added:
            print(f"{server.program} at {server.url} (added already)")
        else:
            print(f"{server.program} at {server.url}: add it with kestrel servers add {server.name} {server.url} "
                  f"--kind {server.kind.value}")
    if not found and not args.json:
        print("No server answered on this PC's usual ports (Ollama 11434, LM Studio 1234, llama-server 8080).",
              file=sys.stderr)
    return EXIT_OK


def _models(args: argparse.Namespace, book: ServerBook) -> int:
    try:
        models = book.models(args.name)
    except ServerFault as fault:
        raise UserError(str(fault), EXIT_SERVER) from None
    for model in models:
        if args.json:
            print(json.dumps(_model_json(model), ensure_ascii=False))
        else:
            context = f"{model.context_length:,} tokens" if model.context_length else "context not said"
            abilities = ", ".join(sorted(model.abilities)) if model.abilities_known else "abilities not said"
            print(f"{terminal_line(model.id)}\t{context}\t{abilities or 'text only'}")
    if not models and not args.json:
        print(f"{terminal_line(args.name)} lists no models.", file=sys.stderr)
    return EXIT_OK


def _model_json(model: RemoteModel) -> dict[str, Any]:
    return {"id": model.id, "server": model.server, "name": model.name, "context_length": model.context_length,
            "abilities": sorted(model.abilities) if model.abilities_known else None, "size": model.size}


def _key_from_stdin() -> str:
    """One line of standard input, without its line end: a key is never an argument (ps would show it)."""
    line = sys.stdin.readline(MAX_KEY_CHARS + 1) if sys.stdin is not None else ""
    key = line.rstrip("\r\n").strip()
    if len(key) > MAX_KEY_CHARS:
        raise UserError(f"The key is longer than {MAX_KEY_CHARS} characters.", EXIT_USAGE)
    return key


def _quoted(name: str) -> str:
    return f'"{name}"' if " " in name else name
