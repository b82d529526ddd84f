"""Entry point: `python -m app` opens the window; subcommands run headless."""

from __future__ import annotations

import sys

# Not typing.TYPE_CHECKING: importing typing would take time before main() can catch Ctrl+C.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

EXIT_INTERRUPTED = 130


# Each command word and the module whose add_parser registers it, in the order `kestrel --help` lists them.
# A command imports only its own module: `kestrel models list` spent 0.54 s of its 0.67 s importing every
# command's service code, the window's and the server's among it.
COMMANDS = {
    "chat": "app.cli.chat", "ask": "app.cli.ask", "doctor": "app.cli.doctor", "models": "app.cli.models.models",
    "export": "app.cli.chat_files", "import": "app.cli.chat_files", "serve": "app.cli.serve",
    "servers": "app.cli.servers", "link": "app.cli.link", "tools": "app.cli.tools", "docs": "app.cli.docs",
    "memory": "app.cli.memory", "projects": "app.cli.projects", "transcribe": "app.cli.transcribe",
    "say": "app.cli.say",
}


def command_word(given: list[str]) -> str | None:
    """The command `given` names (its first word that is not an option), None without one."""
    return next((word for word in given if not word.startswith("-")), None)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of `command` alone when it is one (its usage and errors are its own)."""
    import argparse
    import importlib

    from app import __version__

    parser = argparse.ArgumentParser(prog="kestrel", description="Kestrel, an offline AI assistant. Without a command it opens the window.")
    parser.add_argument("--version", action="version", version=f"Kestrel {__version__}")
    parser.add_argument("--background", action="store_true",
                        help="start in the tray without showing the window, as at sign-in (a Kestrel already "
                             "running is left as it is)")
    from app.cli.command_parser import command_actions

    # A command's own mistakes are shown with its own usage (`kestrel chat --bogus hi`).
    commands = command_actions(parser)
    modules = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for module in modules:
        importlib.import_module(module).add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    # Ctrl+C in the first few tenths of a second lands in the imports below (asyncio, the
    # service, the hardware probe), before any command handles it. Everything that can
    # take time is imported inside this try, so the user sees "Interrupted." and status
    # 130 there too, never a KeyboardInterrupt traceback. Only Python's own start-up (its
    # site module, a few hundredths of a second) comes before this and is out of reach.
    try:
        import multiprocessing

        # The engine runs in a spawned child; a frozen (PyInstaller) build needs this first.
        multiprocessing.freeze_support()
        given = sys.argv[1:] if argv is None else argv
        status: int
        if given[:1] == ["ask"]:  # bound to a key: without every command's imports (0.3 s) first
            from app.cli import ask

            status = ask.main(given[1:])
        else:
            if not given or given == ["--background"]:
                # A second launch hands over before every command's imports and Qt (16 s once under load).
                from app.core.window_handover import hand_over_early

                handed = hand_over_early(background=bool(given))
                if handed is not None:
                    return handed
            parser = build_parser(command_word(given))
            args = parser.parse_args(given)
            if args.command is None:
                from app.ui.app import run_gui

                return run_gui(background=args.background)
            if args.background:
                parser.error(f"--background starts the window in the tray; it does nothing with {args.command}")
            status = args.run(args)
        # Output still buffered would meet a closed pipe only at exit, past any handler.
        if sys.stdout is not None:  # None under pythonw
            sys.stdout.flush()
        return status
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except OSError as exc:
        from app.cli.closed_output import end_quietly, output_closed

        if not output_closed(exc):
            raise
        return end_quietly()  # `kestrel models list | head -1`: every command alike


if __name__ == "__main__":
    sys.exit(main())
