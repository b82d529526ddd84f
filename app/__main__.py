"""Entry point: `python -m app` opens the window; subcommands run headless."""

from __future__ import annotations

import sys

# Not typing.TYPE_CHECKING: importing typing would take time before main() can catch Ctrl+C.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

EXIT_INTERRUPTED = 130
# The reader of the output went away (`kestrel models list | head -1`): 128 + SIGPIPE, the
# status a shell shows for a Unix tool that signal ended, on every OS alike.
EXIT_CLOSED_PIPE = 141


def build_parser() -> argparse.ArgumentParser:
    import argparse

    from app import __version__

    parser = argparse.ArgumentParser(prog="kestrel", description="Kestrel, an offline AI assistant. Without a command it opens the window.")
    parser.add_argument("--version", action="version", version=f"Kestrel {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    from app.cli import chat, chat_files, doctor, models

    chat.add_parser(commands)
    doctor.add_parser(commands)
    models.add_parser(commands)
    chat_files.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    # Ctrl+C in the first few tenths of a second lands in the imports below (asyncio, the
    # controller, the hardware probe), before any command handles it. Everything that can
    # take time is imported inside this try, so the user sees "Interrupted." and status
    # 130 there too, never a KeyboardInterrupt traceback. Only Python's own start-up (its
    # site module, a few hundredths of a second) comes before this and is out of reach.
    try:
        import multiprocessing

        # The engine runs in a spawned child; a frozen (PyInstaller) build needs this first.
        multiprocessing.freeze_support()
        args = build_parser().parse_args(argv)
        if args.command is None:
            from app.ui.app import run_gui

            return run_gui()
        status: int = args.run(args)
        # Output still buffered would meet a closed pipe only at exit, past any handler.
        if sys.stdout is not None:  # None under pythonw
            sys.stdout.flush()
        return status
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return closed_pipe()


def closed_pipe() -> int:
    """End quietly: what reads the output has what it wanted and left. Nothing is said,
    since standard error may be the same closed pipe, and there is nothing wrong to say.

    Python ignores SIGPIPE, so the write raised instead of ending the process as it ends
    a C tool. The output's descriptors are pointed at the null device, so that Python's
    own flush of what is still buffered, at exit, does not fail a second time and print
    "Exception ignored".
    """
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, stream.fileno())
                os.close(null)
            except (OSError, ValueError, AttributeError):
                pass  # no such stream, or no descriptor: nothing left to flush there
    return EXIT_CLOSED_PIPE


if __name__ == "__main__":
    sys.exit(main())
