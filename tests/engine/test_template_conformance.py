"""Real chat templates render in Kestrel's sandbox exactly as Hugging Face transformers
renders them, so a model gets the prompt its authors tested.

tests/fixtures/chat_templates/ holds templates of current model families, byte for byte
as published (SOURCES.md says where each came from). Every template is rendered with
every conversation below by Kestrel (chat_format.render_embedded) and by the function
transformers' apply_chat_template renders with (render_jinja_template), with the same
bos/eos tokens, add_generation_prompt=True and no tools or documents. The two must be
byte-identical, or both must refuse the conversation.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

import pytest
from transformers.utils import chat_template_utils

from app.engine.templates import template_builtins
from app.engine.templates.chat_format import ModelTokens, render_embedded
from app.engine.protocol import ChatMessage

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "chat_templates"
TEMPLATES = {path.stem: path for path in sorted(FIXTURES.glob("*.jinja"))}
TOKENS = ModelTokens(bos="<s>", eos="</s>")

SYSTEM = ChatMessage("system", "You are a helpful assistant.")
QUESTION = ChatMessage("user", "What is 2 + 2?")


def _turns(*texts: str) -> tuple[ChatMessage, ...]:
    """user, assistant, user, … in turn."""
    return tuple(ChatMessage("user" if i % 2 == 0 else "assistant", text) for i, text in enumerate(texts))


# name -> (messages, extra template variables)
CONVERSATIONS: dict[str, tuple[tuple[ChatMessage, ...], dict[str, Any]]] = {
    "user only": ((ChatMessage("user", "Hello there!"),), {}),
    "system and user": ((SYSTEM, QUESTION), {}),
    "two answers": ((SYSTEM, *_turns("Hi", "Hello! How can I help?", "What is 2 + 2?", "4.", "And 3 + 3?")), {}),
    "two answers, no system": (_turns("Hi", "Hello!", "Tell me a joke.", "Why did the chicken…", "Another"), {}),
    "earlier thinking": (_turns("What is 2 + 2?", "<think>\nTwo and two.\n</think>\n\n4.", "Sure?"), {}),
    # As Kestrel sends a reasoning model's earlier answers: the thinking kept apart.
    "earlier thinking, kept apart": ((QUESTION, ChatMessage("assistant", "4.", thinking="Two and two."),
                                      ChatMessage("user", "Sure?")), {}),
    "unicode": ((ChatMessage("system", "Réponds en français. 日本語も話せます。"),
                 *_turns("你好！🦜 👩‍👩‍👧‍👦 🇯🇵 مرحبا بالعالم שלום",
                         "e\u0301 vs \u00e9, Za\u0308\u0316\u0301lgo\u0334\u0353 (combining marks)",
                         "\u202eRTL override\u202c and a zero\u200bwidth space")), {}),
    # Kestrel sends text as typed: spaces, blank lines, Windows line ends, even nothing.
    "whitespace": ((ChatMessage("system", "  padded system  \n"),
                    *_turns("\n\n  Hello\r\nWorld\t \n", " ", "", "\n", "  trailing  ")), {}),
    "template-like text": (_turns("{{ 7 * 7 }} {% raw %} <|im_end|> <end_of_turn> [INST] </s>"), {}),
    "thinking off": ((QUESTION,), {"enable_thinking": False}),
}


@dataclass(frozen=True)
class Refused:
    """A renderer refused the conversation (the template raised, or could not run)."""

    error: str


def _outcome(render: Callable[[], str]) -> str | Refused:
    try:
        return render()
    except Exception as exc:  # noqa: BLE001 - refusing in any way is one outcome
        return Refused(f"{type(exc).__name__}: {exc}")


def kestrel(template: str, messages: tuple[ChatMessage, ...], variables: dict[str, Any]) -> str | Refused:
    return _outcome(lambda: render_embedded(template, messages, TOKENS, variables=variables))


def transformers(template: str, messages: tuple[ChatMessage, ...], variables: dict[str, Any]) -> str | Refused:
    # An earlier answer's thinking under the names transformers' templates read it by.
    chat = [{"role": m.role, "content": m.content}
            | ({"reasoning_content": m.thinking, "thinking": m.thinking} if m.thinking else {})
            for m in messages]

    def rendered() -> str:
        texts, _ = chat_template_utils.render_jinja_template(
            conversations=[chat], chat_template=template, add_generation_prompt=True,
            bos_token=TOKENS.bos, eos_token=TOKENS.eos, **variables)
        return str(texts[0])

    return _outcome(rendered)


class _FixedNow(datetime):
    """Both renderers see the same date, even across midnight."""

    @classmethod
    def now(cls, tz: Any = None) -> "_FixedNow":
        return cls(2025, 7, 26, 12, 0, 0)


@pytest.fixture(autouse=True)
def fixed_date(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(template_builtins, "datetime", _FixedNow)
    monkeypatch.setattr(chat_template_utils, "datetime", _FixedNow)


def test_the_fixtures_are_there_with_their_sources() -> None:
    sources = (FIXTURES / "SOURCES.md").read_text(encoding="utf-8")
    assert len(TEMPLATES) >= 25
    missing = [name for name in TEMPLATES if f"`{name}.jinja`" not in sources]
    assert not missing, f"SOURCES.md does not say where these came from: {missing}"


@pytest.mark.parametrize("conversation", list(CONVERSATIONS))
@pytest.mark.parametrize("name", list(TEMPLATES))
def test_kestrel_renders_as_transformers_does(name: str, conversation: str) -> None:
    template = TEMPLATES[name].read_bytes().decode("utf-8")  # as stored: CRLF stays CRLF
    messages, variables = CONVERSATIONS[conversation]
    ours = kestrel(template, messages, variables)
    theirs = transformers(template, messages, variables)
    if isinstance(theirs, Refused):
        assert isinstance(ours, Refused), f"transformers refused ({theirs.error}); Kestrel rendered {ours!r}"
    else:
        assert ours == theirs
