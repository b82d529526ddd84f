"""`python -m app doctor`: what this machine has for running models, as a table or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.hardware.probe import probe
from app.hardware.recording import RecordingMachine
from app.hardware.summary import format_report
from app.tools.server_cgroup import containment

EXIT_OK = 0
EXIT_USAGE = 2


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    doctor = commands.add_parser("doctor", help="show the CPU, memory, GPUs, NPUs and runtimes this machine has")
    doctor.add_argument("--json", action="store_true",
                        help="print the report as JSON (keys: os, cpu, ram, gpus, npus, ep_devices, "
                             "onnxruntime, llama, power, errors, mcp_containment)")
    doctor.add_argument("--allow-downloads", action="store_true",
                        help="let Windows ML download the execution providers it offers for this PC "
                             "(needs a network; off by default)")
    doctor.add_argument("--record", type=Path, metavar="FOLDER",
                        help="also write what each source answered into FOLDER (new or empty), so this PC "
                             "can be added to Kestrel's tests; it holds no host name, user name or files")
    doctor.set_defaults(run=run)


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
    if args.json:
        print(json.dumps({**report.to_dict(), "mcp_containment": containment()}, indent=2), flush=True)
    else:
        print(format_report(report), flush=True)
        print(f"\nMCP servers: {containment()}", flush=True)
    if record is not None:
        print(f"Recorded what each source answered into {record}.", file=sys.stderr, flush=True)
    return EXIT_OK
