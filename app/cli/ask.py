"""`kestrel ask [QUESTION]`: the running Kestrel's quick-ask window, or an answer in the terminal."""

from __future__ import annotations

import argparse
import sys

from app import __version__
from app.cli.chat_input import argument_text, stdin_text
from app.cli.command_parser import CommandParser
from app.cli.user_error import EXIT_OK, EXIT_USAGE, UserError
from app.core.instance_line import ANSWER_TIMEOUT_S, Delivery, Do, LineRequest, QuestionTooLong, deliver
from app.core.paths import data_paths

# A Kestrel that runs but did not act: not the person's mistake, and not "not running" (2).
EXIT_NOT_HEARD = 1
NOT_RUNNING_WORDS = 'Kestrel is not running: start it, or give a question (kestrel ask "…")'
_NOT_HEARD_WORDS = {
    Delivery.NO_ANSWER: f"Kestrel is running but did not answer within {ANSWER_TIMEOUT_S:g} seconds: it may be "
                        "starting, or busy. Try again in a moment; if it keeps happening, quit Kestrel from its "
                        "tray menu and start it again.",
    Delivery.NOT_UNDERSTOOD: f"The running Kestrel is another version and did not understand the request (this "
                             f"one is {__version__}): quit it from its tray menu and start it again.",
}


_HELP = "open the running Kestrel's quick-ask window (bind it to a key), or answer here"
_DESCRIPTION = ("Open the running Kestrel's quick-ask window, asking QUESTION in it if one is given. Meant to be bound "
                "to a key in the desktop's own keyboard settings (the command: kestrel ask), where Kestrel's own "
                "shortcut cannot be held. Without a running Kestrel, QUESTION is answered here, as kestrel chat "
                "QUESTION answers it.")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _add_arguments(commands.add_parser("ask", help=_HELP, description=_DESCRIPTION))


def main(argv: list[str]) -> int:
    """`kestrel ask …` parsed on its own: app/__main__.py comes here before building every command's
    parser, whose imports (the service, the engine's wire) would add about 0.3 s to a key press."""
    parser = CommandParser(prog="kestrel ask", description=_DESCRIPTION)
    _add_arguments(parser)
    args = parser.parse_args(argv)
    status: int = args.run(args)
    return status


def _add_arguments(ask: argparse.ArgumentParser) -> None:
    ask.add_argument("question", metavar="QUESTION", nargs="?", default="",
                     help="the question; - reads standard input (xsel -o | kestrel ask -); none: just open the "
                          "window")
    ask.add_argument("-v", "--verbose", action="store_true", help="say on standard error what was done")
    ask.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        question = _question(args.question)
        try:
            delivery = deliver(data_paths(), LineRequest(Do.ASK, question))
        except QuestionTooLong as exc:
            raise UserError(str(exc), EXIT_USAGE) from None
    except UserError as exc:
        print(f"kestrel: {exc}", file=sys.stderr)
        return exc.status
    if delivery is Delivery.HEARD:
        if args.verbose:
            print("kestrel: the running Kestrel opened its quick-ask window.", file=sys.stderr)
        return EXIT_OK
    if not question:
        if delivery is Delivery.NOT_RUNNING:
            print(f"kestrel: {NOT_RUNNING_WORDS}", file=sys.stderr)
            return EXIT_USAGE
        print(f"kestrel: {_NOT_HEARD_WORDS[delivery]}", file=sys.stderr)
        return EXIT_NOT_HEARD
    if delivery is not Delivery.NOT_RUNNING:
        print(f"kestrel: {_NOT_HEARD_WORDS[delivery]} Answering here instead.", file=sys.stderr)
    elif args.verbose:
        print("kestrel: Kestrel is not running; answering here.", file=sys.stderr)
    from app.cli import chat  # the model and the engine, only when the answer is given here

    return chat.run(chat.one_shot_args(args.question), prompt=question)


def _question(given: str) -> str:
    """The question: the argument, or standard input for -, without the spaces around it; "" for
    none (an argument of only spaces, or empty input: `xsel -o | kestrel ask -` with nothing
    selected just opens the window)."""
    if given == "-":
        if sys.stdin is None:  # started without one (pythonw, a desktop's key binding)
            return ""
        buffer = getattr(sys.stdin, "buffer", None)
        text = stdin_text(buffer.read()) if buffer is not None else sys.stdin.read()
    else:
        text = argument_text(given, "The question")
    return text.strip()  # a piped line's end, or blank lines around it, mean nothing to the question
