"""Record the names PyWinRT gives the Windows calls Kestrel makes, from the pinned wheels' type stubs.

Windows does not run here, so tests/helpers/fake_winrt stands in for PyWinRT. This writes
tests/fixtures/windows_voices/pywinrt_api.json: for each module Kestrel imports, each class's members as the
wheels' .pyi (or .py) files declare them, with the wheels' names and SHA-256. tests/voice/test_windows_voices.py
checks that every name Kestrel calls, and every name the stand-in offers for it, is there.

    python3 scripts/record_pywinrt_api.py

Needs the package registry (pip download, win_amd64 wheels, pip's cache used).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "windows_voices" / "pywinrt_api.json"
# The modules app/voice/synthesis/windows_voices.py imports, and the file in the wheel that declares each.
MODULES = {"winrt.windows.media.speechsynthesis": "winrt/windows/media/speechsynthesis/__init__.pyi",
           "winrt.windows.storage.streams": "winrt/windows/storage/streams/__init__.pyi",
           "winrt.windows.foundation": "winrt/windows/foundation/__init__.pyi",
           "winrt.runtime": "winrt/runtime/__init__.py"}


def pinned() -> list[str]:
    """The voice extra's PyWinRT requirements, as pyproject.toml pins them."""
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    return [line.split(";")[0].strip() for line in extra["voice"] if line.lower().startswith("winrt-")]


def members(source: str) -> dict[str, list[str]]:
    """Each class's members (methods, properties, fields, enum values), and the module's own names under ""."""
    # PEP 695's type parameters (class IAsyncOperation[TResult](...)) and type statements are left out: Python 3.11
    # cannot parse them.
    source = re.sub(r"^(\s*(?:class|def) \w+)\[[^\]]*\]", r"\1", source, flags=re.MULTILINE)
    tree = ast.parse(re.sub(r"^type \w+.*$", "", source, flags=re.MULTILINE))
    found: dict[str, list[str]] = {"": []}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    names.update(target.id for target in item.targets if isinstance(target, ast.Name))
            found[node.name] = sorted(names)
            found[""].append(node.name)
        elif isinstance(node, (ast.FunctionDef, ast.ImportFrom)):
            found[""].extend([node.name] if isinstance(node, ast.FunctionDef)
                             else [alias.asname or alias.name for alias in node.names])
    found[""] = sorted(set(found[""]))
    return found


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                               "--platform", "win_amd64", "--python-version", "3.12", "-d", folder, *pinned()],
                              capture_output=True, text=True)
        if done.returncode != 0:
            print(done.stderr[-2000:], file=sys.stderr)
            return 1
        wheels = sorted(Path(folder).glob("*.whl"))
        api: dict[str, dict[str, list[str]]] = {}
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as archive:
                for module, inside in MODULES.items():
                    if inside in archive.namelist():
                        api[module] = members(archive.read(inside).decode("utf-8"))
        record = {"about": "The names PyWinRT declares for the modules Kestrel calls, read from these wheels' stubs "
                           "by scripts/record_pywinrt_api.py. Class members by class; the module's names under \"\".",
                  "wheels": {wheel.name: hashlib.sha256(wheel.read_bytes()).hexdigest() for wheel in wheels},
                  "modules": api}
    missing = set(MODULES) - set(api)
    if missing:
        print(f"not found in the wheels: {', '.join(sorted(missing))}", file=sys.stderr)
        return 1
    OUT.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(wheels)} wheels, {sum(len(m) for m in api.values())} classes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
