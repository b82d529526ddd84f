"""CommandParser: a mistake in a command's arguments is answered with that command's usage."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import cast


class CommandParser(argparse.ArgumentParser):
    """The parser of one command (chat, models set, …): an argument it does not know is its
    own error, shown with its own usage (`kestrel chat --bogus hi`), not handed up to the
    top-level parser, whose usage would not help. Its subcommands are CommandParsers too
    (argparse makes them of their parent's class)."""

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def command_actions(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """The top-level parser's commands, each parsed by a CommandParser."""
    actions = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)
    return cast("argparse._SubParsersAction[argparse.ArgumentParser]", actions)
