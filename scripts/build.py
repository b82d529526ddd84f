"""Build the one-folder Kestrel app with PyInstaller (build.spec) and say where it is and its size.

    python scripts/build.py [--dist DIR] [--work DIR] [--clean]

Run it from an environment with Kestrel installed (`python3 scripts/dev.py setup`
makes one, with PyInstaller in its test tools). The app lands in <dist>/Kestrel/:
`Kestrel` (the window; `kestrelw.exe` on Windows) and `kestrel` (the command line),
sharing `_internal/`. build.spec reads the version and the Windows version resource
from here, so they come from pyproject.toml alone.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP_NAME = "Kestrel"
PUBLISHER = "The Kestrel authors"


def project_version() -> str:
    """[project] version of pyproject.toml: the one place the version is written."""
    with open(ROOT / "pyproject.toml", "rb") as file:
        return str(tomllib.load(file)["project"]["version"])


def version_numbers(version: str) -> tuple[int, int, int, int]:
    """The four numbers Windows shows for a version ("0.2.0rc1" -> 0.2.0.0)."""
    release = re.match(r"\d+(\.\d+)*", version)
    numbers = [int(n) for n in release.group().split(".")] if release else []
    padded = (numbers + [0, 0, 0, 0])[:4]
    return padded[0], padded[1], padded[2], padded[3]


def version_file_text(version: str, original_name: str) -> str:
    """The Windows version resource, in the text form PyInstaller's `version=` file takes
    (it evaluates this with its versioninfo classes, which only import on Windows)."""
    numbers = version_numbers(version)
    strings = {
        "CompanyName": PUBLISHER,
        "FileDescription": APP_NAME,
        "FileVersion": version,
        "InternalName": APP_NAME,
        "LegalCopyright": "Apache License 2.0",
        "OriginalFilename": original_name,
        "ProductName": APP_NAME,
        "ProductVersion": version,
    }
    table = ",\n          ".join(f"StringStruct({key!r}, {value!r})" for key, value in strings.items())
    return f"""VSVersionInfo(
  ffi=FixedFileInfo(filevers={numbers}, prodvers={numbers}, mask=0x3f, flags=0x0,
                    OS=0x40004, fileType=0x1, subtype=0x0, date=(0, 0)),
  kids=[
    StringFileInfo([StringTable('040904B0', [
          {table}])]),
    VarFileInfo([VarStruct('Translation', [0x0409, 1200])])
  ]
)
"""


def folder_size(folder: Path) -> int:
    """Bytes under folder, each file once (links not followed)."""
    return sum(path.lstat().st_size for path in folder.rglob("*") if path.is_file() and not path.is_symlink())


def build(dist: Path, work: Path, clean: bool) -> Path:
    command = [sys.executable, "-m", "PyInstaller", str(ROOT / "build.spec"), "--noconfirm",
               "--distpath", str(dist), "--workpath", str(work), "--log-level", "WARN"]
    if clean:
        command.append("--clean")
    subprocess.run(command, cwd=ROOT, check=True)
    return dist / APP_NAME


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dist", type=Path, default=ROOT / "dist", help="where the app folder goes (default: dist/)")
    parser.add_argument("--work", type=Path, default=ROOT / "build", help="PyInstaller's work folder (default: build/)")
    parser.add_argument("--clean", action="store_true", help="start from an empty work folder")
    args = parser.parse_args()
    if importlib.util.find_spec("PyInstaller") is None:
        print("PyInstaller is not installed here: pip install -e '.[test]' (or pip install pyinstaller).",
              file=sys.stderr)
        return 1
    started = time.monotonic()
    try:
        folder = build(args.dist.resolve(), args.work.resolve(), args.clean)
    except subprocess.CalledProcessError as exc:
        print(f"The build failed (PyInstaller exited with {exc.returncode}); see the messages above.", file=sys.stderr)
        return 1
    seconds = time.monotonic() - started
    print(f"Built Kestrel {project_version()} in {seconds:.0f} s: {folder}{os.sep} "
          f"({folder_size(folder) / 1e6:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
