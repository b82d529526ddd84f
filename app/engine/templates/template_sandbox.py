"""The sandbox a model's chat template runs in: what transformers gives it, within limits.

A chat template is code from a downloaded file. Jinja's immutable sandbox already stops
it from reaching Python's internals, files or the OS; this module adds what the sandbox
does not bound: time, output size, and the few operations that allocate without limit in
one step (`'x' * 10**9`, `10 ** 10**8`, `'%01000000000d' % 1`, `center(10**9)`, a join or
replace whose result is quadratic in its input). Any of them ends the render with
TemplateLimit, whose message says what the template tried; the caller falls back to a
built-in format and tells the user why.

The environment matches what Hugging Face transformers' `apply_chat_template` gives a
template, so that a model gets the prompt its authors tested: trim_blocks and
lstrip_blocks, the loopcontrols extension (`{% break %}`, `{% continue %}`), and the
names of app/engine/templates/template_builtins.py. tests/engine/test_template_conformance.py
checks real templates against transformers itself.
"""

from __future__ import annotations

import math
import re
import sys
import time
from functools import lru_cache
from types import FrameType
from typing import Any, Callable, Iterable, Mapping

from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.ext import loopcontrols
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment

from app.engine.control import PromptCancelled
from app.engine.templates.template_builtins import (
    GenerationBlock,
    TemplateDict,
    TemplateLimit,
    TemplateNamespace,
    TemplateRaised,
    lipsum,
    raise_exception,
    strftime_now,
    tojson,
    too_big,
)

# A prompt far longer than any context (about two million tokens) is never useful.
MAX_OUTPUT_CHARS = 8_000_000
# Widths, counts and indents beyond this are not chat formatting.
MAX_NUMBER = 1_000_000
# Integers beyond this many bits are not chat formatting either (about 20,000 digits).
MAX_INT_BITS = 65_536
# Real templates render a long chat in milliseconds.
MAX_SECONDS = 2.0
# And a very long one (thousands of messages) in about 50 µs a message: each message gives
# the template this much more time.
SECONDS_PER_MESSAGE = 0.001
# A template that ran out of time on at most this many messages is slow on any chat.
_TIMED_OUT_MESSAGES = 16
# The largest real templates (tool-use variants) are tens of kilobytes.
MAX_TEMPLATE_CHARS = 512_000

TEMPLATE_FILENAME = "<chat template>"


def _size(value: Any) -> int:
    return len(value) if isinstance(value, (str, list, tuple, dict)) else 0


def _check_numbers(args: Iterable[Any], what: str) -> None:
    for value in args:
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)) and not math.isnan(value) and abs(value) > MAX_NUMBER:
            raise too_big(f"use the number {value:.6g} in {what}")
        if isinstance(value, (list, tuple)) and len(value) <= 16:
            _check_numbers(value, what)


_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\d*)(?:\.(\d*))?")
_BRACE_SPEC = re.compile(r"\{[^{}]*?:([^{}]*)\}")
_DIGITS = re.compile(r"\d+")


def _check_format(text: str, style: str) -> None:
    """Refuse a format string whose widths or precisions are beyond MAX_NUMBER."""
    if style == "%":
        numbers = [n for match in _PERCENT_SPEC.finditer(text) for n in match.groups() if n]
    else:
        numbers = [n for spec in _BRACE_SPEC.findall(text) for n in _DIGITS.findall(spec)]
    for number in numbers:
        if len(number) > 7 or int(number) > MAX_NUMBER:
            raise too_big(f"format text {int(number[:30]):.3g} characters wide")


def _check_result(value: Any, what: str) -> Any:
    if _size(value) > MAX_OUTPUT_CHARS:
        raise too_big(f"make {what} of {_size(value):,} items")
    return value


def _joined_size(items: Iterable[Any], separator: str) -> int:
    total, count = 0, 0
    for item in items:
        total += len(item) if isinstance(item, str) else len(str(item))
        count += 1
        if total > MAX_OUTPUT_CHARS:
            break  # enough to refuse; the rest need not be counted
    return total + max(count - 1, 0) * len(separator)


def _replaced_size(text: str, old: str, new: str, count: int = -1) -> int:
    found = len(text) + 1 if old == "" else text.count(old)
    if count >= 0:
        found = min(found, count)
    return len(text) + found * (len(new) - len(old))


def _check_estimate(size: int, what: str) -> None:
    if size > MAX_OUTPUT_CHARS:
        raise too_big(f"{what} of at least {size:,} characters")


def _check_str_method(text: str, name: str, args: tuple, kwargs: dict) -> None:
    """The str methods whose result can outgrow their inputs by far."""
    if name in ("format", "format_map"):
        _check_format(text, "{}")
    elif name == "join" and args:
        _check_estimate(_joined_size(args[0], text), "join text")
    elif name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        count = args[2] if len(args) > 2 and isinstance(args[2], int) else -1
        _check_estimate(_replaced_size(text, args[0], args[1], count), "replace into text")
    elif name == "expandtabs":
        tab = args[0] if args else kwargs.get("tabsize", 8)
        if isinstance(tab, int):
            _check_estimate(len(text) + text.count("\t") * tab, "expand tabs into text")


# --- the environment -------------------------------------------------------------------


class _BoundedConcat(CodeGenerator):
    """`a ~ b` goes through the environment's concat, so a doubling string is caught in
    time; macro, block and `{% set %}` bodies already do (`concat = environment.concat`)."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


def _bounded_filter(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    # Filters marked pass_context / pass_eval_context / pass_environment get that first.
    passes_first = hasattr(function, "jinja_pass_arg")

    def bounded(*args: Any, **kwargs: Any) -> Any:
        given = args[1:] if passes_first else args
        value, rest = (given[0], given[1:]) if given else (None, ())
        _check_numbers(rest, f"the {name} filter")
        _check_numbers(kwargs.values(), f"the {name} filter")
        if name == "join" and value is not None:
            separator = rest[0] if rest else kwargs.get("d", "")
            _check_estimate(_joined_size(value, str(separator)), "join text")
        elif name == "replace" and isinstance(value, str) and len(rest) >= 2:
            _check_estimate(_replaced_size(value, str(rest[0]), str(rest[1])), "replace into text")
        elif name == "indent" and isinstance(value, str):
            width = rest[0] if rest else kwargs.get("width", 4)
            width_size = len(width) if isinstance(width, str) else int(width)
            _check_estimate(len(value) + (value.count("\n") + 1) * width_size, "indent text")
        elif name == "format" and isinstance(value, str):
            _check_format(value, "%")
        return _check_result(function(*args, **kwargs), f"the result of the {name} filter")

    if passes_first:
        bounded.jinja_pass_arg = function.jinja_pass_arg  # type: ignore[attr-defined]
    return bounded


class ChatTemplateEnvironment(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox with transformers' additions and Kestrel's limits."""

    intercepted_binops = frozenset({"*", "**", "%", "+"})
    code_generator_class = _BoundedConcat

    def __init__(self) -> None:
        super().__init__(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, GenerationBlock])
        self.filters["tojson"] = tojson
        self.filters = {name: _bounded_filter(name, f) for name, f in self.filters.items()}
        # transformers' dict and namespace in place of Jinja's (why: TemplateDict, TemplateNamespace).
        self.globals.update(raise_exception=raise_exception, strftime_now=strftime_now, lipsum=lipsum,
                            dict=TemplateDict(), namespace=TemplateNamespace)

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for sequence, times in ((left, right), (right, left)):
                if _size(sequence) and isinstance(times, int):
                    _check_estimate(_size(sequence) * times, "repeat text")
            if isinstance(left, int) and isinstance(right, int):
                if left.bit_length() + right.bit_length() > MAX_INT_BITS:
                    raise too_big("multiply numbers of tens of thousands of digits")
        elif operator == "**" and isinstance(left, int) and isinstance(right, int):
            if abs(left) > 1 and right > 0 and right * math.log2(abs(left)) > MAX_INT_BITS:
                raise too_big(f"raise {left:.3g} to the power {right:.3g}")
        elif operator == "%" and isinstance(left, str):
            _check_format(left, "%")
            _check_numbers(right if isinstance(right, tuple) else (right,), "a % format")
        elif operator == "+" and _size(left) and _size(right):
            _check_estimate(_size(left) + _size(right), "add up text")
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - Jinja's signature
        name = getattr(__obj, "__name__", "a function")
        _check_numbers(args, name)
        _check_numbers(kwargs.values(), name)
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, str):
            _check_str_method(owner, name, args, kwargs)
        result = super().call(__context, __obj, *args, **kwargs)
        return _check_result(result, f"the result of {name}")

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        # Jinja swaps str.format for its own formatter when the method is looked up.
        wrapped = super().wrap_str_format(value)
        if wrapped is not None:
            _check_format(value.__self__, "{}")
        return wrapped

    def concat(self, values: Iterable[Any]) -> str:
        parts = [value if isinstance(value, str) else str(value) for value in values]
        _check_estimate(sum(len(part) for part in parts), "join text")
        return "".join(parts)


ENVIRONMENT = ChatTemplateEnvironment()


@lru_cache(maxsize=8)
def compile_template(source: str) -> Any:
    """The compiled template; a model's template is compiled once, not on every turn."""
    if len(source) > MAX_TEMPLATE_CHARS:
        raise TemplateLimit(f"it is {len(source):,} characters long; real chat templates are "
                            f"under {MAX_TEMPLATE_CHARS:,}")
    code = ENVIRONMENT.compile(source, filename=TEMPLATE_FILENAME)
    return ENVIRONMENT.template_class.from_code(ENVIRONMENT, code, ENVIRONMENT.make_globals(None), None)


class _Deadline:
    """A trace function on the template's own frames only: its loops end at the deadline,
    or when the request is cancelled (PromptCancelled: a long conversation is rendered
    line by line, and a client that left should not hold the engine).

    Native operations cannot be interrupted, which is why the environment bounds each of
    them; what runs as template code is checked on every line it executes.
    """

    def __init__(self, seconds: float, cancelled: Callable[[], bool] | None = None) -> None:
        self.deadline = time.monotonic() + seconds
        self.seconds = seconds
        self.cancelled = cancelled

    def on_call(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if frame.f_code.co_filename == TEMPLATE_FILENAME:
            self._check()
            return self.on_line
        return None

    def on_line(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        self._check()
        return self.on_line

    def _check(self) -> None:
        if self.cancelled is not None and self.cancelled():
            raise PromptCancelled()
        if time.monotonic() > self.deadline:
            raise TemplateLimit(f"it was still running after {self.seconds:g} s; real chat "
                                "templates take milliseconds")


# Templates that ran past their time, by source (a few: one engine serves one model). A
# template too slow for a three-turn probe is too slow for any chat, and each render
# costs its full time: a load probes the template and the first answer renders it again,
# so without this a hostile template cost a chat twice MAX_SECONDS.
_TIMED_OUT: dict[str, str] = {}
_TIMED_OUT_KEPT = 4


def render(source: str, variables: Mapping[str, Any], *, seconds: float = MAX_SECONDS,
           cancelled: Callable[[], bool] | None = None) -> str:
    """Render a chat template within the limits; TemplateLimit or the template's own error
    otherwise (the caller reports both). One that ran out of time on a short conversation
    is refused at once afterwards; a long conversation gets more time (SECONDS_PER_MESSAGE),
    and running out of it does not mark the template. cancelled is looked at on every
    line the template runs (PromptCancelled)."""
    if source in _TIMED_OUT:
        raise TemplateLimit(_TIMED_OUT[source])
    template = compile_template(source)
    messages = variables.get("messages")
    count = len(messages) if isinstance(messages, (list, tuple)) else 0
    deadline = _Deadline(seconds + count * SECONDS_PER_MESSAGE, cancelled)
    previous = sys.gettrace()
    sys.settrace(deadline.on_call)
    try:
        parts: list[str] = []
        total = 0
        for part in template.generate(**variables):
            total += len(part)
            if total > MAX_OUTPUT_CHARS:
                raise too_big(f"write more than {MAX_OUTPUT_CHARS:,} characters")
            parts.append(part)
        return "".join(parts)
    except TemplateLimit as exc:
        if time.monotonic() > deadline.deadline and count <= _TIMED_OUT_MESSAGES:
            while len(_TIMED_OUT) >= _TIMED_OUT_KEPT:
                del _TIMED_OUT[next(iter(_TIMED_OUT))]
            _TIMED_OUT[source] = str(exc)
        raise
    finally:
        sys.settrace(previous)


__all__ = ["ENVIRONMENT", "TemplateLimit", "TemplateRaised", "compile_template", "render"]
