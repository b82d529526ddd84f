"""How fast the window appears, and when the model is ready: `python -m app` as users start it,
or the frozen app (scripts/build.py) with --frozen.

    python benchmarks/startup.py [--runs 5] [--model PATH] [--frozen DIR] [--json OUT]

Each run starts the app in a fresh process (offscreen unless a display is set) with
its own Kestrel home holding one model, reads the times the app logs (from process
start to the window's first paint, and to the model being ready), then closes it
with SIGTERM. Prints a table (medians) and writes JSON. --frozen DIR times DIR's
windowed executable (DIR is the built Kestrel/ folder) the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def one_run(model: Path, command: list[str]) -> dict:
    with running_app(model, command) as (_app, log):
        return _wait_for(log, {"window_shown", "model_ready"}, timeout=120)


def app_command(frozen: Path | None) -> list[str]:
    """How the window is started: from source, or the frozen folder's windowed executable."""
    if frozen is None:
        return [sys.executable, "-m", "app"]
    name = "kestrelw.exe" if os.name == "nt" else "Kestrel"
    return [str(frozen.resolve() / name)]


@contextlib.contextmanager
def running_app(model: Path, command: list[str] | None = None) -> Iterator[tuple[subprocess.Popen, Path]]:
    """The app (`command`, by default from source) in a fresh home holding `model` as its
    default, and the log of its start-up times; closed with SIGTERM on the way out."""
    with tempfile.TemporaryDirectory(prefix="kestrel-app ") as home:
        log = Path(home) / "startup.jsonl"
        env = dict(os.environ, KESTREL_HOME=home, KESTREL_STARTUP_LOG=str(log))
        env.setdefault("QT_QPA_PLATFORM", "offscreen")
        # The model goes in with this Python either way: the frozen app reads the same home.
        subprocess.run([sys.executable, "-c", _INSTALL, str(model)], env=env, check=True, cwd=ROOT)
        app = subprocess.Popen(command or app_command(None), env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            yield app, log
        finally:
            app.send_signal(signal.SIGTERM)
            app.wait(timeout=30)


_INSTALL = """
import sys
from pathlib import Path
from app.core.paths import data_paths
from app.core.settings import Settings, SettingsFile
from app.library.importer import import_model_file
from app.library.models import ModelLibrary
paths = data_paths().ensure()
model = import_model_file(ModelLibrary(paths.models), Path(sys.argv[1]))
SettingsFile(paths.settings_file).save(Settings(default_model=model.id))
"""


def _wait_for(log: Path, wanted: set[str], timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = {}
        if log.exists():
            for line in log.read_text().splitlines():
                item = json.loads(line)
                events.setdefault(item["event"], item["seconds"])
        if wanted <= set(events):
            return events
        time.sleep(0.05)
    raise TimeoutError(f"the app did not log {wanted} within {timeout} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--model", type=Path, help="a GGUF file (default: the starter model)")
    parser.add_argument("--frozen", type=Path, metavar="DIR", help="time the frozen app in DIR (dist/Kestrel)")
    parser.add_argument("--json", type=Path, help="where to write the runs (default: benchmarks/results/"
                        "startup.json, or startup-frozen.json with --frozen)")
    args = parser.parse_args()
    results = ROOT / "benchmarks" / "results"
    args.json = args.json or results / ("startup-frozen.json" if args.frozen else "startup.json")
    model = args.model
    if model is None:
        from tests.helpers.models import build_small_real

        folder = ROOT / "benchmarks" / "results"
        folder.mkdir(parents=True, exist_ok=True)
        model = build_small_real(folder)
    command = app_command(args.frozen)
    runs = [one_run(model, command) for _ in range(args.runs)]
    shown = statistics.median(r["window_shown"] for r in runs)
    ready = statistics.median(r["model_ready"] for r in runs)
    print(f"{'frozen ' + str(args.frozen) if args.frozen else 'from source'}: model {model.name}, "
          f"{args.runs} runs (medians, from process start)")
    print(f"{'window shown':<14} {shown * 1000:8.0f} ms")
    print(f"{'model ready':<14} {ready * 1000:8.0f} ms")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"model": str(model), "command": command, "runs": runs,
                                     "window_shown_s": shown, "model_ready_s": ready}, indent=2))
    print(f"\nwritten: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
