"""Entry point: `python -m app` opens the window; subcommands run headless."""

from __future__ import annotations

import sys

# Not typing.TYPE_CHECKING: importing typing would take time before main() can catch Ctrl+C.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    import argparse

    from app import __version__

    parser = argparse.ArgumentParser(prog="kestrel", description="Kestrel, an offline AI assistant. Without a command it opens the window.")
    parser.add_argument("--version", action="version", version=f"Kestrel {__version__}")
    parser.add_argument("--background", action="store_true",
                        help="start in the tray without showing the window, as at sign-in (a Kestrel already "
                             "running is left as it is)")
    from app.cli import ask, chat, chat_files, docs, doctor, memory, serve, tools
    from app.cli import servers
    from app.cli.models import models
    from app.cli.command_parser import command_actions

    # A command's own mistakes are shown with its own usage (`kestrel chat --bogus hi`).
    commands = command_actions(parser)

    chat.add_parser(commands)
    ask.add_parser(commands)
    doctor.add_parser(commands)
    models.add_parser(commands)
    chat_files.add_parser(commands)
    serve.add_parser(commands)
    servers.add_parser(commands)
    tools.add_parser(commands)
    docs.add_parser(commands)
    memory.add_parser(commands)
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
            parser = build_parser()
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
