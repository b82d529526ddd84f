"""What Hugging Face transformers gives a chat template beyond plain Jinja, within limits.

transformers' `apply_chat_template` is what model authors test their templates with, so a
template gets the same names here: `raise_exception`, `strftime_now`, a `tojson` with
json.dumps' keywords, the `{% generation %}` block, and transformers' restricted `dict`
and `namespace`. Each is bounded the way the sandbox bounds everything else
(app/engine/templates/template_sandbox.py).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from jinja2 import TemplateError, nodes
from jinja2.exceptions import SecurityError
from jinja2.ext import Extension
from jinja2.parser import Parser
from jinja2.utils import Namespace, generate_lorem_ipsum


class TemplateLimit(TemplateError):
    """The template went past one of the sandbox's limits; the message says which."""


class TemplateRaised(TemplateError):
    """The template called raise_exception(); its message is the template author's."""


def too_big(what: str) -> TemplateLimit:
    return TemplateLimit(f"it tried to {what}, more than a chat prompt can use")


def raise_exception(message: str) -> None:
    raise TemplateRaised(message)


_STRFTIME_WIDTH = re.compile(r"%[-_0^#]*(\d+)")


def strftime_now(format: str) -> str:
    """Today's date as the template asks for it ("%d %B %Y")."""
    if len(format) > 1_000:
        raise too_big(f"format a date with {len(format):,} characters of format")
    for width in _STRFTIME_WIDTH.findall(format):
        if len(width) > 4:
            raise too_big(f"format a date {width[:12]} characters wide")
    return datetime.now().strftime(format)


def tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
           separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    """json.dumps, as transformers' tojson (not Jinja's HTML-safe one)."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:  # noqa: A002 - Jinja's names
    if n > 100 or max > 1_000:
        raise too_big(f"write {n} paragraphs of up to {max} words of filler")
    return str(generate_lorem_ipsum(n=n, html=html, min=min, max=max))


class GenerationBlock(Extension):
    """transformers' `{% generation %}…{% endgeneration %}`: marks the assistant's own
    tokens for training masks. Without a mask request it renders its body unchanged."""

    tags = {"generation"}

    def parse(self, parser: Parser) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body).set_lineno(lineno)


class TemplateDict:
    """`dict` as transformers gives it: make a dict, or `dict.fromkeys`, nothing else.

    Jinja's own global is the `dict` type, whose unbound methods take any dict as their
    first argument: `dict.update(messages[0], …)` changes the conversation, which the
    immutable sandbox only refuses when the method is looked up on the dict itself.
    transformers swaps it for this, so templates written against it need nothing more.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, keys: Any, value: Any = None) -> dict[Any, Any]:
        return dict.fromkeys(keys, value)


class TemplateNamespace(Namespace):
    """`namespace()` refusing names that start with an underscore, as transformers' does.

    A Namespace keeps its values in a name-mangled attribute and special-cases a few
    underscore names when they are read; refusing them all keeps a template from
    reaching those, and Kestrel then refuses exactly the templates transformers refuses.
    """

    def __init__(*args: Any, **kwargs: Any) -> None:  # noqa: N805 - Namespace's own trick: `self` may be a keyword
        self, rest = args[0], args[1:]
        values = dict(*rest, **kwargs)
        for name in values:
            _check_name(name)
        Namespace.__init__(self, values)

    def __setitem__(self, name: str, value: Any) -> None:
        _check_name(name)
        Namespace.__setitem__(self, name, value)


def _check_name(name: object) -> None:
    if isinstance(name, str) and name.startswith("_"):
        raise SecurityError(f"a chat template may not keep {name!r} in a namespace: names starting "
                            "with an underscore are refused")
