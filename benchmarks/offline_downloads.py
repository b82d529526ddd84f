"""Offline downloads: the time from starting a download to its error, with no way to the server.

    python benchmarks/offline_downloads.py [--runs 3] [--json OUT]

Goal (issue 27): no network -> the first try's error within 3 s, in words that say so.

`kestrel models get` as a user runs it (a fresh process, stderr read as it arrives):
- a catalog model from Hugging Face itself (offline here: its name does not resolve),
- a catalog model with HF_ENDPOINT at a name that never resolves (`nonexistent.invalid`),
- a plain address on a closed port of 127.0.0.1 (connection refused);
each timed to its first line (what it is doing) and to its error. In-process, the
downloader alone (UnitDownload) on the same three, and on a resolver that never answers
(getaddrinfo held for 30 s: a network whose DNS server is unreachable), which the name
lookup's own time limit (budget.LOOKUP_S) must cut.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.library.catalog import load_catalog  # noqa: E402
from app.library.download import DownloadError, FileSpec, UnitDownload  # noqa: E402

GOAL_S = 3.0


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def cli_run(what: str, **env: str) -> dict[str, Any]:
    """`models get what` in a fresh home: seconds to its first stderr line and to its exit."""
    with tempfile.TemporaryDirectory() as home:
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "app", "models", "get", what], cwd=ROOT,
                                env=dict(os.environ, KESTREL_HOME=home, PYTHONUNBUFFERED="1", **env),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        lines: list[tuple[float, str]] = []
        for line in proc.stderr:
            lines.append((time.monotonic() - started, line.rstrip("\n")))
        proc.wait(timeout=120)
        ended = time.monotonic() - started
    first = lines[0][0] if lines else ended
    error = next((t for t, text in lines if text.startswith("kestrel:")), ended)
    return {"first_line_s": first, "error_s": error, "exit": proc.returncode,
            "said": [text for _, text in lines]}


def in_process(url: str, hold_lookup: bool = False) -> dict[str, Any]:
    """UnitDownload alone: seconds to its DownloadError."""
    real = socket.getaddrinfo
    released = threading.Event()

    def silent(*args: Any, **kwargs: Any) -> Any:
        released.wait(30)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    if hold_lookup:
        socket.getaddrinfo = silent  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory() as folder:
            started = time.monotonic()
            try:
                UnitDownload([FileSpec(url, "m.gguf")], Path(folder)).run()
                message = "(it downloaded)"
            except DownloadError as exc:
                message = exc.message
            return {"error_s": time.monotonic() - started, "said": [message]}
    finally:
        socket.getaddrinfo = real  # type: ignore[assignment]
        released.set()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    entry = next(e for e in load_catalog() if e.recommended)
    port = closed_port()
    cases: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        (f"models get {entry.id} (huggingface.co)", lambda: cli_run(entry.id)),
        (f"models get {entry.id}, HF_ENDPOINT nonexistent.invalid",
         lambda: cli_run(entry.id, HF_ENDPOINT="https://nonexistent.invalid")),
        ("models get a closed port on 127.0.0.1", lambda: cli_run(f"http://127.0.0.1:{port}/m.gguf")),
        ("downloader: huggingface.co", lambda: in_process(f"https://huggingface.co/{entry.repo}/resolve/main/x.gguf")),
        ("downloader: nonexistent.invalid", lambda: in_process("https://nonexistent.invalid/m.gguf")),
        ("downloader: closed port", lambda: in_process(f"http://127.0.0.1:{port}/m.gguf")),
        ("downloader: a resolver that never answers", lambda: in_process("https://silent.invalid/m.gguf", True)),
    ]
    results = []
    print(f"{'case':58} {'first line':>10} {'error':>8}  goal <= {GOAL_S:g} s")
    for name, case in cases:
        runs = [case() for _ in range(args.runs)]
        error_s = statistics.median(r["error_s"] for r in runs)
        first = [r["first_line_s"] for r in runs if "first_line_s" in r]
        first_s = statistics.median(first) if first else None
        met = error_s <= GOAL_S
        results.append({"case": name, "error_s": round(error_s, 3),
                        "first_line_s": None if first_s is None else round(first_s, 3),
                        "met": met, "exit": runs[0].get("exit"), "said": runs[0]["said"]})
        shown_first = f"{first_s:.2f} s" if first_s is not None else "-"
        print(f"{name[:58]:58} {shown_first:>10} {error_s:6.2f} s  {'met' if met else 'MISSED'}")
        print(f"    {runs[0]['said'][-1][:150]}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, ensure_ascii=False))
    return 0 if all(r["met"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
