"""`kestrel tools`: list, add, remove, enable and disable the MCP servers in mcp.json and their tools.

Nothing here starts a server or opens a socket except `tools list --check`, which the user asks for.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import replace
from typing import Any, NoReturn

from app.cli.user_error import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UserError
from app.cli.closed_output import output_closed
from app.cli.models.models_common import EXIT_FILES
from app.cli.terminal_text import disk_failure, shown_path, terminal_line, terminal_text
from app.core.paths import data_paths
from app.tools.config_file import ConfigFileTrouble
from app.tools.choices import ToolChoices, choices_file, read_choices, write_choices
from app.tools.mcp_config import McpServerConfig, read_mcp_file, write_mcp_config
from app.tools.values import ServerState, ServerStatus

EXIT_DAMAGED = 3  # mcp.json is not valid JSON, or not a file Kestrel reads: a change would overwrite it
EXIT_CHECK_FAILED = 8  # `list --check`: an enabled server did not start
_HOW_TO_ADD = ("Add one with: kestrel tools add NAME -- COMMAND [ARGS...] (a stdio server), or "
               "kestrel tools add NAME --url URL (a Streamable HTTP server).")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tools = commands.add_parser("tools", help="list, add, remove, enable or disable MCP tool servers")
    actions = tools.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="the servers in mcp.json; with --check, started and their tools listed")
    listing.add_argument("--check", action="store_true", help="start each enabled server and list its tools or its error")
    listing.add_argument("--timeout", type=float, default=30.0, metavar="S",
                         help="with --check: how long a server may take to start (default 30)")
    listing.add_argument("--json", action="store_true", help="one JSON object per server and line")
    listing.set_defaults(run=run, handler=_list)
    add = actions.add_parser("add", help="add a server: NAME -- COMMAND [ARGS...], or NAME --url URL",
                             usage="kestrel tools add NAME [--env K=V]... -- COMMAND [ARGS...]\n"
                                   "       kestrel tools add NAME --url URL [--header K=V]...")
    add.add_argument("name", metavar="NAME", help="the server's name, as tools and approvals show it")
    _add_options(add)
    # Everything after NAME, parsed in _add: argparse cannot mix options with a command after "--".
    add.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    add.set_defaults(run=run, handler=_add)
    remove = actions.add_parser("remove", help="remove a server from mcp.json")
    remove.add_argument("name", metavar="NAME")
    remove.set_defaults(run=run, handler=_remove)
    for action, words in (("enable", "turn a server, or one of its tools, back on"),
                          ("disable", "turn a server, or one of its tools, off")):
        switch = actions.add_parser(action, help=words)
        switch.add_argument("target", metavar="SERVER[/TOOL]")
        switch.set_defaults(run=run, handler=_switch, enable=action == "enable")


class _OptionsParser(argparse.ArgumentParser):
    """Parses the options given after NAME; a mistake is a UserError like every other here."""

    def error(self, message: str) -> NoReturn:
        raise UserError(f"{message} (kestrel tools add NAME [--env K=V]... -- COMMAND [ARGS...], or "
                        "kestrel tools add NAME --url URL [--header K=V]...)", EXIT_USAGE)


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help="a Streamable HTTP server's address, instead of a command")
    parser.add_argument("--header", action="append", default=[], metavar="K=V", help="with --url: a header to send")
    parser.add_argument("--env", action="append", default=[], metavar="K=V", help="with a command: a variable to set")


_AFTER_NAME = _OptionsParser(prog="kestrel tools add NAME", add_help=False)
_add_options(_AFTER_NAME)


def run(args: argparse.Namespace) -> int:
    """Run the chosen action; a problem the user can fix becomes its message and exit status."""
    as_json = getattr(args, "json", False)
    try:
        status: int = args.handler(args)
        return status
    except UserError as exc:
        if as_json:
            print(json.dumps({"type": "error", "status": exc.status, "message": str(exc)}), flush=True)
        print(f"kestrel: {terminal_text(str(exc))}", file=sys.stderr, flush=True)
        return exc.status
    except ConfigFileTrouble as exc:  # mcp.json is a link Kestrel cannot write through: nothing was written
        print(f"kestrel: {terminal_text(str(exc))}", file=sys.stderr, flush=True)
        return EXIT_FILES
    except OSError as exc:
        if output_closed(exc):
            raise
        print(f"kestrel: {disk_failure(exc, 'write', 'its config folder')}", file=sys.stderr, flush=True)
        return EXIT_FILES
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED


# --- list ---------------------------------------------------------------------------

def _list(args: argparse.Namespace) -> int:
    path = data_paths().mcp_file
    found = read_mcp_file(path)
    if found.damage is not None:
        raise UserError(found.damage, EXIT_DAMAGED)
    servers = list(found.servers)
    choices, choice_problems = read_choices(choices_file(path))
    for problem in [*found.problems, *choice_problems]:
        print(f"kestrel: {terminal_text(problem)}", file=sys.stderr)
    if not servers:
        if not args.json:
            print(f"No MCP servers in {shown_path(path)}. {_HOW_TO_ADD}", file=sys.stderr)
        return EXIT_OK
    statuses = _checked(servers, args.timeout) if args.check else {}
    width = max(len(terminal_line(server.name)) for server in servers)
    for server in servers:
        status = statuses.get(server.name)
        if args.json:
            print(json.dumps(_listing(server, status, choices), ensure_ascii=False))
        else:
            _print_server(server, status, choices, width)
    failed = [status for status in statuses.values() if status.state is ServerState.FAILED]
    return EXIT_CHECK_FAILED if failed else EXIT_OK


def _checked(servers: list[McpServerConfig], timeout: float) -> dict[str, ServerStatus]:
    """Start every enabled server (in parallel, as a chat would), note what each says, end them all."""
    if timeout <= 0:
        raise UserError(f"--timeout {timeout:g} is not allowed: give the seconds a server may take to start, "
                        "more than 0.", EXIT_USAGE)

    from app.tools.pool import McpPool  # the MCP SDK: most of a second, paid only when servers are started

    async def check() -> list[ServerStatus]:
        pool = McpPool(lambda: servers, start_timeout=timeout)
        try:
            await pool.tools([server.name for server in servers])
            return pool.status()
        finally:
            await pool.close()

    return {status.name: status for status in asyncio.run(check()) if status.state is not ServerState.STOPPED}


def _listing(server: McpServerConfig, status: ServerStatus | None, choices: ToolChoices) -> dict[str, Any]:
    """A server as one JSON object; header and variable values are left out (they are often keys)."""
    row: dict[str, Any] = {"name": server.name, "enabled": server.enabled}
    if server.url is not None:
        row.update(transport="http", url=server.url, headers=sorted(server.headers))
    else:
        row.update(transport="stdio", command=server.command, args=list(server.args), env=sorted(server.env))
    if status is not None:
        row.update(state=status.state.value, error=status.error, stderr=list(status.stderr_tail),
                   tools=[{"name": tool.name, "model_name": tool.model_name, "description": tool.description,
                           "enabled": choices.is_enabled(server.name, tool.name),
                           "always_allowed": choices.is_always_allowed(server.name, tool.name)}
                          for tool in status.tools])
    return row


def _print_server(server: McpServerConfig, status: ServerStatus | None, choices: ToolChoices, width: int) -> None:
    mark = "on " if server.enabled else "off"
    print(f"{terminal_line(server.name):<{width}}  {mark}  {terminal_line(server.where)}")
    if status is None:
        return
    if status.state is ServerState.READY:
        names = [terminal_line(tool.name) + ("" if choices.is_enabled(server.name, tool.name) else " (off)")
                 for tool in status.tools]
        print(f"  ready, {len(names)} tool{'s' if len(names) != 1 else ''}: {', '.join(names) or 'none'}")
        return
    print(f"  failed: {terminal_line(status.error)}")
    for line in status.stderr_tail[-10:]:
        print(f"    stderr: {terminal_line(line)}")


# --- changes --------------------------------------------------------------------------

def _readable_config() -> tuple[list[McpServerConfig], list[str]]:
    """The servers, and every name in the file; refused when a change would overwrite a damaged file."""
    found = read_mcp_file(data_paths().mcp_file)
    if found.damage is not None:
        raise UserError(f"{found.damage} Kestrel changes nothing in it until it is fixed.", EXIT_DAMAGED)
    return list(found.servers), list(found.names)


def _add(args: argparse.Namespace) -> int:
    _split_rest(args)
    servers, names = _readable_config()
    name = args.name.strip()
    if not name or "/" in name:
        raise UserError(f'"{terminal_line(args.name)}" cannot be a server name: give a name without "/", '
                        "such as time or files.", EXIT_USAGE)
    if name in names:
        raise UserError(f'There is already a server named "{terminal_line(name)}". Remove it first '
                        f"(kestrel tools remove {terminal_line(name)}) or choose another name.", EXIT_USAGE)
    server = _new_server(name, args)
    write_mcp_config(data_paths().mcp_file, [*servers, server])
    print(f'Added "{terminal_line(name)}": {terminal_line(server.where)}. It starts when a chat uses its tools; '
          f"see its tools with: kestrel tools list --check")
    return EXIT_OK


def _split_rest(args: argparse.Namespace) -> None:
    """Options up to "--" (when what follows NAME starts with one), the command after it."""
    rest: list[str] = args.rest
    options: list[str] = []
    if rest and rest[0].startswith("-"):
        cut = rest.index("--") if "--" in rest else len(rest)
        options, rest = rest[:cut], rest[cut + 1:]
    after = _AFTER_NAME.parse_args(options)
    args.url = after.url if after.url is not None else args.url
    args.header = [*args.header, *after.header]
    args.env = [*args.env, *after.env]
    args.command = rest


def _new_server(name: str, args: argparse.Namespace) -> McpServerConfig:
    if args.url is not None:
        if args.command:
            raise UserError("Give either a command (after --) or --url, not both.", EXIT_USAGE)
        if args.env:
            raise UserError("--env is for servers Kestrel starts; a --url server gets --header instead.", EXIT_USAGE)
        if not args.url.startswith(("http://", "https://")):
            raise UserError(f"--url {terminal_line(args.url)} is not an http:// or https:// address.", EXIT_USAGE)
        return McpServerConfig(name, url=args.url, headers=_pairs(args.header, "--header"))
    if not args.command:
        raise UserError(f"Say how to start the server: kestrel tools add {terminal_line(name)} -- COMMAND [ARGS...], "
                        "or give its address with --url URL.", EXIT_USAGE)
    if args.header:
        raise UserError("--header is for --url servers; a server Kestrel starts gets --env instead.", EXIT_USAGE)
    return McpServerConfig(name, command=args.command[0], args=tuple(args.command[1:]), env=_pairs(args.env, "--env"))


def _pairs(given: list[str], flag: str) -> dict[str, str]:
    pairs = {}
    for item in given:
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise UserError(f"{flag} {terminal_line(item)} is not NAME=VALUE (for example {flag} "
                            f"{'Authorization=Bearer KEY' if flag == '--header' else 'API_KEY=abc'}).", EXIT_USAGE)
        pairs[key.strip()] = value
    return pairs


def _remove(args: argparse.Namespace) -> int:
    servers, names = _readable_config()
    if args.name not in names:
        raise UserError(_no_server(args.name, names), EXIT_USAGE)
    path = data_paths().mcp_file
    write_mcp_config(path, [server for server in servers if server.name != args.name], drop=[args.name])
    choices, _ = read_choices(choices_file(path))
    if choices.forgetting_server(args.name) != choices:
        write_choices(choices_file(path), choices.forgetting_server(args.name))
    print(f'Removed "{terminal_line(args.name)}" from {shown_path(path)}.')
    return EXIT_OK


def _switch(args: argparse.Namespace) -> int:
    servers, names = _readable_config()
    server_name, slash, tool = args.target.partition("/")
    found = next((server for server in servers if server.name == server_name), None)
    if found is None:
        raise UserError(_no_server(server_name, names), EXIT_USAGE)
    state = "on" if args.enable else "off"
    path = data_paths().mcp_file
    if not slash:
        write_mcp_config(path, [replace(server, enabled=args.enable) if server is found else server
                                for server in servers])
        print(f'The server "{terminal_line(server_name)}" is {state}.')
        return EXIT_OK
    if not tool:
        raise UserError(f"Name the tool after the slash: {terminal_line(server_name)}/TOOL (see kestrel tools "
                        "list --check).", EXIT_USAGE)
    choices, _ = read_choices(choices_file(path))
    changed = choices.enabling(server_name, tool) if args.enable else choices.disabling(server_name, tool)
    write_choices(choices_file(path), changed)
    print(f'The tool "{terminal_line(tool)}" of "{terminal_line(server_name)}" is {state}.')
    return EXIT_OK


def _no_server(name: str, names: list[str]) -> str:
    if not names:
        return f'There is no server named "{terminal_line(name)}": mcp.json has none. {_HOW_TO_ADD}'
    return (f'There is no server named "{terminal_line(name)}". The servers are: '
            f"{', '.join(terminal_line(known) for known in names)}.")
