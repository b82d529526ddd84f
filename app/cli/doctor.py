"""`python -m app doctor`: what this machine has for running models and the servers added, as a table or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from app.core.paths import data_paths
from app.hardware.probe import probe
from app.hardware.recording import RecordingMachine
from app.hardware.summary import format_report
from app.library.servers.faults import ServerFault
from app.library.servers.keys import ServerKeys, keys_file
from app.library.servers.listing import list_models
from app.library.servers.records import AddedServer
from app.library.servers.server_list import ServerList, servers_file
from app.tools.server_cgroup import containment

EXIT_OK = 0
EXIT_USAGE = 2


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    doctor = commands.add_parser("doctor", help="show the CPU, memory, GPUs, NPUs and runtimes this machine has")
    doctor.add_argument("--json", action="store_true",
                        help="print the report as JSON (keys: os, cpu, ram, gpus, npus, ep_devices, "
                             "onnxruntime, llama, power, errors, mcp_containment, servers, servers_problem)")
    doctor.add_argument("--allow-downloads", action="store_true",
                        help="let Windows ML download the execution providers it offers for this PC "
                             "(needs a network; off by default)")
    doctor.add_argument("--record", type=Path, metavar="FOLDER",
                        help="also write what each source answered into FOLDER (new or empty), so this PC "
                             "can be added to Kestrel's tests; it holds no host name, user name or files")
    doctor.add_argument("--check-servers", action="store_true",
                        help="also ask each server you added whether it answers and how many models it lists "
                             "(off by default: the doctor contacts no server unless told to)")
    doctor.set_defaults(run=run)


@dataclass(frozen=True)
class ServerCheck:
    """One server the person added, as the doctor reports it. reachable: None when it was not asked (no
    --check-servers); said: its models' count when it answered, else its fault in words."""

    name: str
    kind: str
    url: str
    key_kept: bool
    reachable: bool | None = None
    said: str = ""


def servers_report(check: bool) -> tuple[list[ServerCheck], str | None]:
    """The servers added, each with whether a key is kept for it (the key itself is never read out), asked only
    when `check`; and why the list shows fewer servers than its file holds (None: it read well)."""
    paths = data_paths()
    listing = ServerList(servers_file(paths))
    servers = listing.list()
    keys = ServerKeys(keys_file(paths))
    kept = {server.name: keys.get(server.name) for server in servers}
    if not check or not servers:
        return [ServerCheck(s.name, s.kind.value, s.url, kept[s.name] is not None) for s in servers], \
            listing.last_problem
    with ThreadPoolExecutor(max_workers=min(8, len(servers))) as pool:
        asked = list(pool.map(lambda s: _ask(s, kept[s.name]), servers))
    return asked, listing.last_problem


def _ask(server: AddedServer, key: str | None) -> ServerCheck:
    try:
        models = list_models(server, key)
    except ServerFault as fault:
        return ServerCheck(server.name, server.kind.value, server.url, key is not None, False, str(fault))
    count = f"{len(models)} model{'s' if len(models) != 1 else ''}"
    return ServerCheck(server.name, server.kind.value, server.url, key is not None, True, f"answers, lists {count}")


def servers_table(servers: list[ServerCheck], problem: str | None, checked: bool) -> str:
    """The servers' part of the table: one line each, and what to do to ask them."""
    if not servers:
        return "Servers you added: none. Nothing is contacted." + (f" ({problem})" if problem else "")
    lines = [f"Servers you added ({len(servers)}):"]
    for server in servers:
        key = "key kept" if server.key_kept else "no key"
        state = server.said if checked else "not contacted"
        lines.append(f"  {server.name} · {server.kind} · {server.url} · {key} · {state}")
    if not checked:
        lines.append("  (kestrel doctor --check-servers asks each whether it answers.)")
    if problem:
        lines.append(f"  {problem}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Print the report. A failed source is part of the report, so this exits 0 all the same."""
    for stream in (sys.stdout, sys.stderr):
        # A Windows console in a legacy code page must not crash on a GPU's ™ sign.
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    record = getattr(args, "record", None)
    if record is not None and record.exists() and (not record.is_dir() or any(record.iterdir())):
        print(f"kestrel doctor: {record} is not an empty folder; name a new one to record into.", file=sys.stderr)
        return EXIT_USAGE
    if record is not None:
        report = probe(RecordingMachine(record), allow_downloads=args.allow_downloads)
    else:
        report = probe(allow_downloads=args.allow_downloads)
    check = bool(getattr(args, "check_servers", False))
    servers, problem = servers_report(check)
    if args.json:
        print(json.dumps({**report.to_dict(), "mcp_containment": containment(),
                          "servers": [asdict(server) for server in servers], "servers_problem": problem},
                         indent=2), flush=True)
    else:
        print(format_report(report), flush=True)
        print(f"\nMCP servers: {containment()}", flush=True)
        print("\n" + servers_table(servers, problem, check), flush=True)
    if record is not None:
        print(f"Recorded what each source answered into {record}.", file=sys.stderr, flush=True)
    return EXIT_OK
