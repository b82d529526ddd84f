"""Entry point: `python -m app` opens the window; subcommands run headless."""

from __future__ import annotations

import argparse
import multiprocessing
import sys

from app import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kestrel", description="Kestrel, an offline AI assistant. Without a command it opens the window.")
    parser.add_argument("--version", action="version", version=f"Kestrel {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    from app.cli import chat, doctor

    chat.add_parser(commands)
    doctor.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    # The engine runs in a spawned child; a frozen (PyInstaller) build needs this first.
    multiprocessing.freeze_support()
    args = build_parser().parse_args(argv)
    if args.command is None:
        from app.ui.app import run_gui

        return run_gui()
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
