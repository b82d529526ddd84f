"""`kestrel servers`: add, pair, list, remove and find servers whose models Kestrel can chat with; list their models and set what a server does not say of one.

A server is contacted only by `add` and `pair` (to check it answers, unless --no-check), `models`, `find`
(which asks this PC's usual ports, and Foundry Local's own command where its service listens; nothing else)
and `set` (only to read what the server says a model does, when abilities are set for the first time and
not all three are given); `list` and `remove` read and write files only.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any
from urllib.parse import urlsplit

from app.cli.terminal_text import terminal_line
from app.cli.user_error import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UserError
from app.core.paths import data_paths
from app.library.servers.book import ServerBook
from app.library.servers.faults import ServerFault
from app.library.servers.finding import find_on_this_pc
from app.library.servers.link_code import shown_fingerprint
from app.library.servers.link_pairing import PairingRefused
from app.library.servers.records import (DEFAULT_WAIT_S, MAX_SET_CONTEXT, MIN_SET_CONTEXT, ModelAbility, ModelOverride,
                                         RemoteModel, ServerKind, checked_url)
from app.library.servers.server_list import ServerListError

EXIT_SERVER = 7  # `models`: the server did not list its models (down, refused, wrong key, …): as a download that failed
MAX_KEY_CHARS = 4096


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    servers = commands.add_parser("servers", help="add, pair, list, remove or find servers whose models you can chat "
                                                  "with; set a model's context and abilities where its server does "
                                                  "not say them")
    actions = servers.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="add a server: NAME URL (then chat with --model NAME/MODEL)")
    add.add_argument("name", metavar="NAME", help="what to call it (studio-pc); models are then named NAME/MODEL")
    add.add_argument("url", metavar="URL", help="its address, such as http://192.168.1.20:11434")
    add.add_argument("--kind", choices=[kind.value for kind in ServerKind], default=ServerKind.OPENAI.value,
                     help="the API it speaks: openai (LM Studio, llama-server, vLLM, Foundry Local), ollama, "
                          "anthropic (Anthropic's Messages API) or kestrel (default: openai)")
    add.add_argument("--key-stdin", action="store_true", help="read its key from standard input (one line)")
    add.add_argument("--wait", type=float, default=DEFAULT_WAIT_S, metavar="S",
                     help=f"how long an answer waits for the server's next word (default {DEFAULT_WAIT_S:.0f})")
    add.add_argument("--no-check", action="store_true", help="do not contact it now to check that it answers")
    add.add_argument("--code", metavar="CODE", help="another Kestrel's pairing code (Kestrel Link): pair with it at "
                                                    "its https:// address, keeping its key and its certificate's pin")
    add.set_defaults(run=run, handler=_add)
    pairing = actions.add_parser("pair", help="pair with another Kestrel (Kestrel Link): ADDRESS CODE, as its "
                                              "sharing window shows them")
    pairing.add_argument("url", metavar="ADDRESS", help="its https:// address, such as https://192.168.1.20:8765")
    pairing.add_argument("code", metavar="CODE", help="the pairing code it shows")
    pairing.add_argument("--name", help="what to call it (default: its host's name or address)")
    pairing.add_argument("--wait", type=float, default=DEFAULT_WAIT_S, metavar="S",
                         help=f"how long an answer waits for its next word (default {DEFAULT_WAIT_S:.0f})")
    pairing.add_argument("--no-check", action="store_true", help="do not list its models after pairing")
    pairing.set_defaults(run=run, handler=_pair_address)
    listing = actions.add_parser("list", help="the servers you added (contacts none)")
    listing.add_argument("--json", action="store_true", help="one JSON object per server and line")
    listing.set_defaults(run=run, handler=_list)
    remove = actions.add_parser("remove", help="forget a server and its key")
    remove.add_argument("name", metavar="NAME")
    remove.set_defaults(run=run, handler=_remove)
    key = actions.add_parser("key", help="set a server's key from standard input (an empty line forgets it)")
    key.add_argument("name", metavar="NAME")
    key.set_defaults(run=run, handler=_key)
    find = actions.add_parser("find", help="look for Ollama, LM Studio and llama-server on this PC's usual ports, "
                                                 "and for Foundry Local's service")
    find.add_argument("--json", action="store_true", help="one JSON object per server found and line")
    find.set_defaults(run=run, handler=_find)
    models = actions.add_parser("models", help="the models a server has (it is contacted), with what you set by hand "
                                                 "marked beside what it says")
    models.add_argument("name", metavar="NAME")
    models.add_argument("--json", action="store_true", help="one JSON object per model and line")
    models.set_defaults(run=run, handler=_models)
    setting = actions.add_parser("set", help="set a model's context length and abilities by hand, where its server "
                                             "does not say them (kept in servers.json; --reset: as it says)")
    setting.add_argument("name", metavar="NAME", help="the server")
    setting.add_argument("model", metavar="MODEL", help="the model's id on it, as kestrel servers models NAME lists")
    setting.add_argument("--context", type=int, metavar="N", help=f"its context length in tokens "
                                                                  f"({MIN_SET_CONTEXT} to {MAX_SET_CONTEXT:,})")
    for ability, words in ((ModelAbility.VISION, "it takes images"), (ModelAbility.TOOLS, "it calls tools"),
                           (ModelAbility.EMBEDDINGS, "it makes embeddings (and does not chat)")):
        setting.add_argument(f"--{ability.value}", dest=ability.value, action=argparse.BooleanOptionalAction,
                             help=words)
    setting.add_argument("--reset", action="store_true", help="forget what was set by hand first: the model is "
                                                              "as its server says, then the other options apply")
    setting.set_defaults(run=run, handler=_set)


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
    if args.code is not None:
        return _pair(args, book)
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
    return EXIT_OK if args.no_check else _say_models(book, server.name)


def _say_models(book: ServerBook, name: str) -> int:
    try:
        models = book.models(name)
    except ServerFault as fault:
        print(f"kestrel: it is added, but: {fault}", file=sys.stderr)
        return EXIT_OK
    names = ", ".join(terminal_line(m.name) for m in models[:5]) + (", …" if len(models) > 5 else "")
    print(f"It answers with {len(models)} model(s){': ' + names if models else ''}. Chat with one: "
          f"kestrel chat --model {_quoted(name)}/MODEL \"Hello\"")
    return EXIT_OK


def _pair(args: argparse.Namespace, book: ServerBook) -> int:
    """Kestrel Link: pair with the Kestrel at the address, then list its models as add does."""
    if ServerKind(args.kind) != ServerKind.KESTREL or args.key_stdin:
        raise UserError("--code pairs with another Kestrel: give --kind kestrel and no --key-stdin (pairing gives "
                        "the key).", EXIT_USAGE)
    try:
        added = book.pair(args.name, args.url, args.code, wait_s=args.wait)
    except ValueError as exc:
        raise UserError(str(exc), EXIT_USAGE) from None
    except PairingRefused as exc:
        raise UserError(str(exc), EXIT_SERVER) from None
    except (ServerListError, OSError) as exc:
        raise UserError(f"Paired, but the server was not added: {exc}", EXIT_USAGE) from None
    server = added.server
    print(f"Paired with {terminal_line(server.name)} at {server.url}; its certificate is pinned "
          f"({shown_fingerprint(server.pin)[:19]}…).")
    if added.key is not None:
        print(added.key.words)
    return EXIT_OK if args.no_check else _say_models(book, server.name)


def _pair_address(args: argparse.Namespace, book: ServerBook) -> int:
    """`servers pair ADDRESS CODE`: `servers add NAME ADDRESS --kind kestrel --code CODE`, the name its host's."""
    url = args.url if "://" in args.url else "https://" + args.url.strip()  # a Kestrel shares over TLS only
    try:
        host = urlsplit(checked_url(url)).hostname or ""
    except ValueError as exc:
        raise UserError(str(exc), EXIT_USAGE) from None
    name = args.name if args.name is not None else \
        "".join(c if c.isalnum() or c in "-_." else "-" for c in host).strip("-_.")[:40] or "kestrel"
    return _pair(argparse.Namespace(name=name, url=url, code=args.code, kind=ServerKind.KESTREL.value,
                                    key_stdin=False, wait=args.wait, no_check=args.no_check), book)


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
        print("No server answered on this PC's usual ports (Ollama 11434, LM Studio 1234, llama-server 8080), and "
              "Foundry Local's service is not running here.", file=sys.stderr)
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
            print("\t".join([terminal_line(model.id), *_model_words(model)]))
    if not models and not args.json:
        print(f"{terminal_line(args.name)} lists no models.", file=sys.stderr)
    return EXIT_OK


def _model_words(model: RemoteModel) -> tuple[str, str]:
    """Its context and abilities in words, each marked where the person set it by hand, with what the server said."""
    said, by_hand = model.as_said, model.by_hand
    context = f"{model.context_length:,} tokens" if model.context_length else "context not said"
    if by_hand is not None and by_hand.context_length is not None:
        context += " (set by hand; " + (f"the server says {said.context_length:,})" if said.context_length
                                        else "the server does not say)")
    abilities = _abilities_words(model)
    if by_hand is not None and by_hand.abilities is not None:
        abilities += f" (set by hand; the server says {_abilities_words(said)})"
    return context, abilities


def _abilities_words(model: RemoteModel) -> str:
    if not model.abilities_known:  # an OpenAI-compatible server may say vision, and nothing of tools
        return ", ".join(sorted(model.abilities)) + "; tools not said" if model.abilities else "abilities not said"
    return ", ".join(sorted(model.abilities)) or "text only"


def _model_json(model: RemoteModel) -> dict[str, Any]:
    """As listed; "set_by_hand" holds what the person set (null: nothing), and "said" what the server said."""
    said, by_hand = model.as_said, model.by_hand
    return {"id": model.id, "server": model.server, "name": model.name, "context_length": model.context_length,
            "abilities": sorted(model.abilities) if model.abilities_known else None, "size": model.size,
            "set_by_hand": by_hand.to_json() if by_hand is not None else None,
            "said": {"context_length": said.context_length,
                     "abilities": sorted(said.abilities) if said.abilities_known else None}}


def _set(args: argparse.Namespace, book: ServerBook) -> int:
    """`servers set NAME MODEL ...`: what the person sets by hand for one model, kept in servers.json."""
    flags = {ability: getattr(args, ability.value) for ability in (ModelAbility.VISION, ModelAbility.TOOLS,
                                                                   ModelAbility.EMBEDDINGS)}
    given = {ability: on for ability, on in flags.items() if on is not None}
    if args.context is None and not given and not args.reset:
        raise UserError("Say what to set: --context N, --vision or --no-vision, --tools or --no-tools, --embeddings "
                        "or --no-embeddings, or --reset (as the server says).", EXIT_USAGE)
    if args.context is not None and not MIN_SET_CONTEXT <= args.context <= MAX_SET_CONTEXT:
        raise UserError(f"A context length is from {MIN_SET_CONTEXT} to {MAX_SET_CONTEXT:,} tokens "
                        f"(got {args.context}).", EXIT_USAGE)
    server = book.get(args.name)
    if server is None:
        raise UserError(f'No server called "{args.name}" is added (kestrel servers list shows them).', EXIT_USAGE)
    before = ModelOverride() if args.reset else server.overrides.get(args.model, ModelOverride())
    abilities = before.abilities
    if given:
        if abilities is None:
            abilities = _said_abilities(book, server.name, args.model, complete=len(given) == len(flags))
        abilities = (abilities - {a for a, on in given.items() if not on}) | {a for a, on in given.items() if on}
    override = ModelOverride(args.context if args.context is not None else before.context_length, abilities)
    try:
        kept = book.set_override(server.name, args.model, override)
    except (ServerListError, OSError) as exc:
        raise UserError(f"Nothing was set: {exc}", EXIT_USAGE) from None
    model = RemoteModel(kept.name, args.model).with_override(kept.overrides.get(args.model))
    if model.by_hand is None:
        print(f"{terminal_line(model.id)} is as its server says: nothing is set by hand.")
        return EXIT_OK
    context = f"context {model.context_length:,} tokens" if model.by_hand.context_length else "context as said"
    abilities_said = (", ".join(sorted(model.abilities)) or "text only") if model.by_hand.abilities is not None \
        else "as said"
    print(f"{terminal_line(model.id)}: {context}, abilities {abilities_said} (set by hand; kestrel servers set "
          f"{_quoted(kept.name)} {_quoted(args.model)} --reset goes back to what the server says).")
    return EXIT_OK


def _said_abilities(book: ServerBook, name: str, model: str, *, complete: bool) -> frozenset[ModelAbility]:
    """What Kestrel uses the model for now, as its server says (it is asked), before the person's first change:
    the abilities not named keep it. Nothing is asked when all three are named."""
    if complete:
        return frozenset()
    try:
        listed = next((m for m in book.models(name) if m.name == model), None)
    except ServerFault as fault:
        raise UserError(f"{fault} Kestrel asks it what {model} does before changing one ability; or name all three "
                        "(--vision or --no-vision, --tools or --no-tools, --embeddings or --no-embeddings) to set "
                        "them without asking it.", EXIT_SERVER) from None
    if listed is None:
        raise UserError(f'{name} lists no model called "{model}" (kestrel servers models {_quoted(name)} shows '
                        "them). Name all three abilities to set them for it all the same.", EXIT_USAGE)
    return listed.as_said.abilities_in_use


def _key_from_stdin() -> str:
    """One line of standard input, without its line end: a key is never an argument (ps would show it)."""
    line = sys.stdin.readline(MAX_KEY_CHARS + 1) if sys.stdin is not None else ""
    key = line.rstrip("\r\n").strip()
    if len(key) > MAX_KEY_CHARS:
        raise UserError(f"The key is longer than {MAX_KEY_CHARS} characters.", EXIT_USAGE)
    return key


def _quoted(name: str) -> str:
    return f'"{name}"' if " " in name else name
