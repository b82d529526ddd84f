"""Turns a conversation into the prompt text a model was trained on.

The template inside the model file (`tokenizer.chat_template`) comes first. It is
untrusted code from a downloaded file, so it runs in Jinja's immutable sandbox with no
loader and no access to anything but the conversation. A file without a template, or
one whose template fails, gets the built-in format of its architecture.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from app.engine.protocol import ChatMessage


@dataclass(frozen=True)
class PromptSpec:
    """The rendered prompt and how it was made."""

    text: str
    chat_format: str
    stop: tuple[str, ...]
    note: str | None = None


@dataclass(frozen=True)
class ModelTokens:
    """The special tokens a template may refer to, as text."""

    bos: str = ""
    eos: str = ""


class _TemplateRaised(Exception):
    """A template called raise_exception(); its message is for the user."""


def _raise_exception(message: str) -> None:
    raise _TemplateRaised(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _tojson(value: object, indent: int | None = None) -> str:
    # Hugging Face templates expect json.dumps semantics, not Jinja's HTML-safe tojson.
    return json.dumps(value, ensure_ascii=False, indent=indent)


def _sandbox() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.filters["tojson"] = _tojson
    return env


_ENV = _sandbox()


def render_embedded(
    template: str, messages: Sequence[ChatMessage], tokens: ModelTokens
) -> str:
    """Render a model's own chat template in the sandbox."""
    compiled = _ENV.from_string(template)
    return compiled.render(
        messages=[{"role": m.role, "content": m.content} for m in messages],
        add_generation_prompt=True,
        bos_token=tokens.bos,
        eos_token=tokens.eos,
    )


def _gemma(messages: Sequence[ChatMessage], tokens: ModelTokens) -> str:
    # Gemma has no system role: the system text opens the first user turn.
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    parts = [tokens.bos]
    first_user = True
    for message in messages:
        if message.role == "system":
            continue
        role = "model" if message.role == "assistant" else "user"
        content = message.content
        if role == "user" and first_user and system:
            content = f"{system}\n\n{content}"
        if role == "user":
            first_user = False
        parts.append(f"<start_of_turn>{role}\n{content.strip()}<end_of_turn>\n")
    parts.append("<start_of_turn>model\n")
    return "".join(parts)


def _chatml(messages: Sequence[ChatMessage], tokens: ModelTokens) -> str:
    parts = [f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n" for m in messages]
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def _llama3(messages: Sequence[ChatMessage], tokens: ModelTokens) -> str:
    parts = [tokens.bos]
    for m in messages:
        parts.append(
            f"<|start_header_id|>{m.role}<|end_header_id|>\n\n{m.content.strip()}<|eot_id|>"
        )
    parts.append("<|start_header_id|>assistant<|end_header_id|>\n\n")
    return "".join(parts)


def _phi3(messages: Sequence[ChatMessage], tokens: ModelTokens) -> str:
    parts = [f"<|{m.role}|>\n{m.content}<|end|>\n" for m in messages]
    parts.append("<|assistant|>\n")
    return "".join(parts)


_BUILTIN = {
    "gemma": (_gemma, ("<end_of_turn>",)),
    "chatml": (_chatml, ("<|im_end|>",)),
    "llama3": (_llama3, ("<|eot_id|>",)),
    "phi3": (_phi3, ("<|end|>",)),
}


def builtin_format_for(architecture: str, tokens: ModelTokens) -> str:
    """The built-in format for a model without a usable template of its own."""
    if architecture.startswith("gemma"):
        return "gemma"
    if architecture.startswith("phi3"):
        return "phi3"
    if tokens.eos == "<|eot_id|>" or architecture == "llama" and "eot_id" in tokens.eos:
        return "llama3"
    return "chatml"


def build_prompt(
    messages: Sequence[ChatMessage],
    *,
    template: str | None,
    architecture: str,
    tokens: ModelTokens,
) -> PromptSpec:
    """The prompt for a conversation, from the model's template or a built-in format."""
    note = None
    if template:
        try:
            text = render_embedded(template, messages, tokens)
            return PromptSpec(text, "embedded", _stops_for_template(template))
        except _TemplateRaised as exc:
            note = f"The model's chat template refused the conversation ({exc}); used a built-in format."
        except (TemplateError, TypeError, ValueError, AttributeError) as exc:
            note = f"The model's chat template could not be used ({exc}); used a built-in format."
    name = builtin_format_for(architecture, tokens)
    render, stops = _BUILTIN[name]
    return PromptSpec(render(messages, tokens), name, stops, note)


def _stops_for_template(template: str) -> tuple[str, ...]:
    """End-of-turn markers a template uses: a guard for models that print them as text."""
    markers = ("<end_of_turn>", "<|im_end|>", "<|eot_id|>", "<|end|>")
    return tuple(marker for marker in markers if marker in template)
