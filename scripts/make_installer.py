"""Build the Windows installer (installer/kestrel.nsi) around a frozen one-folder build with makensis.

    python scripts/make_installer.py                      dist/Kestrel -> dist/Kestrel-<version>-setup.exe
    python scripts/make_installer.py --frozen DIR --out FILE [--no-starter] [--bundled-model DIR]

Runs on Windows and on Linux (Debian's `nsis` package). On Linux the payload is the Linux
build, so the installer only proves the script compiles and holds the right files; it is
not a Windows installer (installer/README.md).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import importlib.util
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "installer" / "kestrel.nsi"
DEFAULT_ICON = ROOT / "resources" / "icons" / "kestrel.ico"
# NSIS installers cannot hold more than 2 GiB; leave room for the stub, the uninstaller and the headers (a
# few hundred KiB together; 16 MiB is ample). The size counted is each file as stored, a symlink's target again.
MAX_PAYLOAD = 2 * 1024**3 - 16 * 1024**2
# The two executables of build.spec (executable_names()): Windows ignores case in file
# names, so there the window is kestrelw.exe beside kestrel.exe.
EXECUTABLES = {"windows": ("kestrelw.exe", "kestrel.exe"), "other": ("Kestrel", "kestrel")}


class BuildError(Exception):
    """Something the person building can fix; str() says what."""


@dataclass(frozen=True)
class Product:
    """What the installer calls the app, from the one place each fact is kept."""

    name: str
    version: str
    publisher: str
    data_author: str  # platformdirs' appauthor and appname: the user's data folder
    data_app: str
    license: str

    numeric_version: str  # four numbers for the version resource: 0.1.0rc1 -> 0.1.0.0


def _constant(path: Path, name: str) -> str:
    """A NAME = "value" line of a module, read without importing it (and all it imports)."""
    found = re.search(rf'^{name}\s*=\s*"([^"]*)"', path.read_text(encoding="utf-8"), re.MULTILINE)
    if found is None:
        raise BuildError(f"{path} has no {name} = \"...\" line; the installer needs it.")
    return found.group(1)


def _build_script():
    """scripts/build.py, which keeps the name, publisher and version the executables carry."""
    spec = importlib.util.spec_from_file_location("kestrel_build", ROOT / "scripts" / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _license() -> str:
    with open(ROOT / "pyproject.toml", "rb") as file:
        license = tomllib.load(file)["project"].get("license", "")
    return str(license.get("text", "") if isinstance(license, dict) else license) or "see the project"


def read_product() -> Product:
    build = _build_script()
    version = build.project_version()
    paths = ROOT / "app" / "core" / "paths.py"
    return Product(name=build.APP_NAME, version=version, publisher=build.PUBLISHER,
                   data_author=_constant(paths, "APP_AUTHOR"), data_app=_constant(paths, "APP_NAME"),
                   license=_license(), numeric_version=".".join(map(str, build.version_numbers(version))))


def starter_prefix() -> str:
    """What the starter's chunk packages' names begin with; their data folders all start with it."""
    return _constant(ROOT / "app" / "library" / "starter.py", "STARTER_PACKAGE_PREFIX")


@dataclass(frozen=True)
class Payload:
    """The frozen folder split into the program and the starter model's folders; the
    starter's are left out altogether unless with_starter."""

    frozen: Path
    gui_exe: str
    cli_exe: str
    starter: tuple[Path, ...]
    with_starter: bool

    @property
    def top_level(self) -> list[Path]:
        return sorted(self.frozen.iterdir())


def read_payload(frozen: Path, with_starter: bool) -> Payload:
    if not frozen.is_dir():
        raise BuildError(f"There is no frozen build at {frozen}: run scripts/build.py first.")
    gui, cli = EXECUTABLES["windows" if (frozen / EXECUTABLES["windows"][0]).is_file() else "other"]
    for exe in (gui, cli):
        if not (frozen / exe).is_file():
            raise BuildError(f"{frozen} has no {exe}: it is not a complete build of scripts/build.py.")
    internal = frozen / "_internal"
    starter = tuple(sorted(p for p in internal.glob(starter_prefix() + "*") if p.is_dir())) \
        if internal.is_dir() else ()
    return Payload(frozen, gui, cli, starter, with_starter and bool(starter))


def _nsis(path: Path | str) -> str:
    """A path as a quoted NSIS string ($ is NSIS's variable sign)."""
    text = str(path)
    if '"' in text:
        raise BuildError(f"NSIS cannot take a path with a double quote in it: {text}")
    return '"' + text.replace("$", "$$") + '"'


def payload_nsh(payload: Payload, bundled: Path | None) -> str:
    """The generated include: the macros sections.nsh and uninstaller.nsh insert."""
    excluded = " ".join(f"/x {_nsis(p.name)}" for p in payload.starter)
    lines = ["; Generated by scripts/make_installer.py from " + str(payload.frozen) + "; do not edit.",
             "!macro KESTREL_PROGRAM_FILES"]
    for entry in payload.top_level:
        lines.append(f"  File /r {excluded} {_nsis(entry)}" if entry.is_dir() else f"  File {_nsis(entry)}")
    lines += ["!macroend", "", "!macro KESTREL_STARTER_FILES", '  SetOutPath "$INSTDIR\\_internal"']
    lines += [f"  File /r {_nsis(folder)}" for folder in payload.starter if payload.with_starter]
    lines += ["!macroend", "", "; Only what the program part put there: a folder the user chose may hold more.",
              "!macro KESTREL_REMOVE_PROGRAM_FILES"]
    for entry in payload.top_level:
        target = _nsis("$INSTDIR\\" + entry.name).replace("$$INSTDIR", "$INSTDIR")
        lines.append(f"  RMDir /r {target}" if entry.is_dir() else f"  Delete {target}")
    lines += ["!macroend", "", "!macro KESTREL_BUNDLED_FILES"]
    if bundled is not None:
        lines += ['  SetOutPath "${DATA_DIR}\\models"', f"  File /r {_nsis(bundled)}"]
    lines += ["!macroend", ""]
    return "\n".join(lines)


def folder_size(paths: list[Path]) -> int:
    total = 0
    for path in paths:
        files = [path] if path.is_file() else [f for f in path.rglob("*") if f.is_file()]
        total += sum(f.stat().st_size for f in files)
    return total


def bundled_model(folder: Path) -> tuple[str, str]:
    """The folder's name in the models folder and the model's title, from its model.json."""
    import json
    try:
        title = str(json.loads((folder / "model.json").read_text(encoding="utf-8"))["title"])
    except (OSError, ValueError, KeyError) as exc:
        raise BuildError(f"{folder} is not a model folder from scripts/fetch_bundled_model.py "
                         f"(its model.json could not be read: {exc}).") from None
    return folder.name, title


def find_makensis(given: str | None) -> str:
    candidates = [given] if given else [shutil.which("makensis")] + [
        str(Path(os.environ[var]) / "NSIS" / "makensis.exe")
        for var in ("ProgramFiles(x86)", "ProgramFiles") if os.environ.get(var)]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return candidate
    raise BuildError("makensis was not found. Install NSIS (Debian/Ubuntu: apt-get install nsis; "
                     "Windows: choco install nsis) or name it with --makensis.")


def defines(product: Product, payload: Payload, out: Path, payload_file: Path, icon: Path | None,
            bundled: Path | None, compressor: str) -> dict[str, str]:
    values = {"APP_NAME": product.name, "APP_VERSION": product.version,
              "VI_VERSION": product.numeric_version, "PUBLISHER": product.publisher,
              "LICENSE": product.license,
              "GUI_EXE": payload.gui_exe, "CLI_EXE": payload.cli_exe,
              "DATA_AUTHOR": product.data_author, "DATA_APP": product.data_app,
              "PAYLOAD": str(payload_file), "OUTFILE": str(out), "COMPRESSOR": compressor}
    if icon is not None:
        values["ICON"] = str(icon)
    if payload.with_starter:
        values["STARTER"] = "1"
    if bundled is not None:
        values["BUNDLED_MODEL_FOLDER"], values["BUNDLED_MODEL_NAME"] = bundled_model(bundled)
    return values


def build(args: argparse.Namespace) -> Path:
    product = read_product()
    payload = read_payload(args.frozen.resolve(), not args.no_starter)
    bundled = args.bundled_model.resolve() if args.bundled_model else None
    icon = None if args.no_icon else args.icon.resolve()
    if icon is not None and not icon.is_file():
        raise BuildError(f"The icon {icon} is missing: run scripts/make_icons.py (or pass --no-icon "
                         f"for a quick check of the script).")
    size = folder_size(payload.top_level + ([bundled] if bundled else []))
    if not payload.with_starter:
        size -= folder_size(list(payload.starter))
    if size > MAX_PAYLOAD:
        raise BuildError(f"The installer would hold {size / 1024**3:.2f} GiB, over NSIS's limit of 2 GiB: "
                         f"leave out the bundled model (or the starter).")
    out = (args.out or ROOT / "dist" / f"{product.name}-{product.version}-setup.exe").resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    payload_file = (args.work / "payload.nsh").resolve()
    payload_file.write_text(payload_nsh(payload, bundled), encoding="utf-8")
    command = [find_makensis(args.makensis), "-V3", "-WX", "-INPUTCHARSET", "UTF8"]
    command += [f"-D{k}={v}" for k, v in defines(product, payload, out, payload_file, icon,
                                                   bundled, args.compressor).items()]
    command.append(str(SCRIPT))
    result = subprocess.run(command, capture_output=True, text=True, encoding="utf-8", errors="replace")
    (args.work / "makensis.log").write_text(result.stdout + result.stderr, encoding="utf-8")
    if result.returncode != 0:
        raise BuildError(f"makensis failed (exit {result.returncode}):\n{result.stdout}{result.stderr}")
    print(f"Installer: {out} ({out.stat().st_size / 1024**2:.1f} MB; "
          f"{size / 1024**2:.1f} MB of files in it)", flush=True)
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frozen", type=Path, default=ROOT / "dist" / "Kestrel", help="the one-folder build")
    p.add_argument("--out", type=Path, help="the installer to write (default dist/Kestrel-<version>-setup.exe)")
    p.add_argument("--work", type=Path, default=ROOT / "build" / "installer",
                   help="where the generated payload.nsh and makensis.log go")
    p.add_argument("--icon", type=Path, default=DEFAULT_ICON)
    p.add_argument("--no-icon", action="store_true", help="NSIS's own icon (a check of the script only)")
    p.add_argument("--no-starter", action="store_true", help="leave the starter model out")
    p.add_argument("--bundled-model", type=Path, metavar="DIR",
                   help="a model folder made by scripts/fetch_bundled_model.py, offered as a component")
    p.add_argument("--compressor", choices=["lzma", "zlib", "none"], default="lzma",
                   help="lzma for a release; zlib builds several times faster; none for checking the payload")
    p.add_argument("--makensis", help="the makensis to run (default: on PATH, or NSIS's folder on Windows)")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        build(parser().parse_args(argv))
    except BuildError as exc:
        print(f"make_installer: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
