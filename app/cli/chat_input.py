"""What `kestrel chat` is given: the message (an argument or standard input) and the flags' values, checked before a model loads."""

from __future__ import annotations

import argparse
import codecs
import dataclasses
import os
import sys
from collections.abc import Callable

from app.cli.user_error import EXIT_USAGE, UserError
from app.core.generation import GenerationSettings
from app.library.model_defaults import ALLOWED


def prompt_text(given: str) -> str:
    """The message: the argument, or standard input for -; UserError if there is none."""
    if given != "-":
        prompt = argument_text(given, "The message")
        if not prompt.strip():
            raise UserError("The message is empty. Give a message, or - to read it from standard input.",
                            EXIT_USAGE)
        return prompt
    if sys.stdin is None:  # started without one (pythonw, a closed descriptor)
        raise UserError("There is no standard input to read the message from (-). Give the message "
                        "after chat instead.", EXIT_USAGE)
    buffer = getattr(sys.stdin, "buffer", None)
    prompt = stdin_text(buffer.read()) if buffer is not None else sys.stdin.read()
    if not prompt.strip():
        held = " (it held only spaces and line breaks)" if prompt else ""
        raise UserError(f"Standard input was empty{held}, so there is no message to send. Pipe the "
                        "message in (for example: echo Hello | kestrel chat -), or give it after chat "
                        "instead of -.", EXIT_USAGE)
    return prompt


def stdin_text(data: bytes) -> str:
    """Standard input's bytes as text: UTF-8, or UTF-16 after its byte-order mark.

    Read as bytes, not through the console's code page. Text that is not UTF-8 is refused
    rather than read with replacement characters: a file in Latin-1, or a binary file piped
    by mistake, would otherwise reach the model as a prompt the user never wrote, and the
    answer would not say why. UTF-16 with a byte-order mark is what Windows PowerShell 5 and
    Notepad's "Unicode" write, so it is read.
    """
    encoding, skipped = "utf-8", 0
    if data.startswith(codecs.BOM_UTF8):
        skipped = len(codecs.BOM_UTF8)
        data = data[skipped:]
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        if encoding == "utf-16":
            problem = ("it starts with a UTF-16 byte-order mark, but what follows is not UTF-16 text "
                       f"(at byte offset {exc.start:,})")
        else:
            problem = (f"the byte 0x{data[exc.start]:02X} at offset {skipped + exc.start:,} is not part of "
                       "any UTF-8 character")
        raise UserError(f"Standard input is not UTF-8 text: {problem}. Convert it to UTF-8 first (most "
                        "editors can save as UTF-8), or give the message after chat.", EXIT_USAGE) from exc
    # As text-mode reading would: Windows line ends become plain ones.
    return text.replace("\r\n", "\n").replace("\r", "\n")


def argument_text(value: str, what: str) -> str:
    """An argument as typed; UserError if its bytes were not UTF-8 (POSIX keeps them as
    lone surrogates, which nothing downstream can store or encode)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = value[exc.start]
        byte = f" (byte 0x{ord(bad) - 0xDC00:02X})" if 0xDC80 <= ord(bad) <= 0xDCFF else ""
        raise UserError(f"{what} is not UTF-8 text{byte}. Set the terminal to UTF-8, or pipe the "
                        "message in as UTF-8 with -.", EXIT_USAGE) from None
    return value


THREADS_ALLOWED = "a whole number, 1 or more"
# The flag that sets each generation setting, for messages about a bad value.
_FLAGS = {"max_tokens": "--max-tokens", "temperature": "--temperature", "min_p": "--min-p", "seed": "--seed",
          "context_length": "--ctx", "thinking": "--think"}


def typed_flag(kind: type[int] | type[float], name: str) -> Callable[[str], int | float]:
    """An argparse type whose refusal names the values the flag takes ("--temperature hot")."""
    allowed = THREADS_ALLOWED if name == "threads" else ALLOWED[name]

    def convert(text: str) -> int | float:
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f'it must be {allowed} (you gave "{text}")') from None

    convert.__name__ = kind.__name__  # what argparse names in its own messages
    return convert


def generation_settings(args: argparse.Namespace, base: GenerationSettings) -> GenerationSettings:
    overrides = {
        "max_tokens": args.max_tokens, "temperature": args.temperature, "min_p": args.min_p,
        "seed": args.seed, "context_length": args.ctx,
        "thinking": None if args.think is None else args.think == "on",
    }
    changed = {k: v for k, v in overrides.items() if v is not None}
    for name, value in changed.items():  # each alone, so the message names its flag
        try:
            dataclasses.replace(GenerationSettings(), **{name: value}).validated()
        except ValueError as exc:
            raise UserError(_flag_problem(name, value, str(exc)), EXIT_USAGE) from exc
    try:
        return dataclasses.replace(base, **changed).validated()
    except ValueError as exc:  # a value from the settings file; it was checked when read
        raise UserError(str(exc), EXIT_USAGE) from exc


def _flag_problem(name: str, value: object, problem: str) -> str:
    """GenerationSettings' "max_tokens must be … (got 0)." as "--max-tokens 0 is not allowed: it must be …"."""
    flag = _FLAGS[name]
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    rule = problem.removeprefix(f"{name} ").split(" (got ")[0].rstrip(".")
    if not rule.startswith("must"):  # worded otherwise: at least say which flag
        return f"{flag} {shown} is not allowed: {problem.replace(name, flag)}"
    return f"{flag} {shown} is not allowed: it {rule}."


def checked_threads(asked: int | None) -> int | None:
    """--threads as given, capped at the CPUs this process may use (more only slow it down)."""
    if asked is None:
        return None
    if asked < 1:
        raise UserError(f"--threads {asked} is not allowed: it must be a whole number of 1 or more "
                        "(leave it out for one thread per physical core).", EXIT_USAGE)
    cpus = _usable_cpus()
    if asked > cpus:
        # More threads than CPUs only wait on each other: 1,000 ran at 0.15 tokens/s.
        print(f"kestrel: --threads {asked} is more than the {_count(cpus, 'logical CPU')} Kestrel may "
              f"use here; using {cpus}.", file=sys.stderr, flush=True)
        return cpus
    return asked


def _usable_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):  # Linux: what this process may run on
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}" if number == 1 else f"{number:,} {noun}s"
