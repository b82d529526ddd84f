"""Set up a development environment: a .venv in the project with Kestrel installed.

    python3 scripts/dev.py setup            the app, its tests and the starter model
    python3 scripts/dev.py setup --app-only the app and the starter model, no test tools

Works the same on Windows (py scripts\\dev.py setup). pip's cache stays on, so the
llama-cpp-python wheel compiled on the first run is reused afterwards.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"


def venv_python() -> Path:
    if os.name == "nt":
        return VENV / "Scripts" / "python.exe"
    return VENV / "bin" / "python"


def setup(app_only: bool) -> None:
    if not venv_python().exists():
        print(f"Creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    extras = "starter" if app_only else "starter,test"
    print("Installing Kestrel (the first run compiles llama.cpp: about 10 minutes)", flush=True)
    env = dict(os.environ, CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 2))
    subprocess.run([str(venv_python()), "-m", "pip", "install", "--disable-pip-version-check",
                    "-e", f".[{extras}]"], cwd=ROOT, check=True, env=env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["setup"])
    parser.add_argument("--app-only", action="store_true", help="skip the test tools")
    args = parser.parse_args()
    try:
        setup(args.app_only)
    except subprocess.CalledProcessError as exc:
        print(f"Setup failed (pip exited with {exc.returncode}); see the messages above.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
