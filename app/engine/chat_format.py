"""Turns a conversation into the prompt text a model was trained on.

The template inside the model file (`tokenizer.chat_template`) comes first. It is
untrusted code from a downloaded file, so it runs in a bounded sandbox
(app/engine/template_sandbox.py). A file without a template, or one whose template
fails in any way, gets the built-in format of its architecture, and the answer's stats
carry the reason (PromptSpec.note) so the user sees why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from jinja2 import TemplateSyntaxError
from jinja2.exceptions import SecurityError

from app.engine.protocol import ChatMessage
from app.engine.template_sandbox import TemplateLimit, TemplateRaised, render


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


def render_embedded(
    template: str, messages: Sequence[ChatMessage], tokens: ModelTokens
) -> str:
    """Render a model's own chat template in the sandbox, with the variables transformers
    passes (no tools and no documents: None, as there)."""
    return render(template, {
        "messages": [{"role": m.role, "content": m.content} for m in messages],
        "add_generation_prompt": True,
        "tools": None,
        "documents": None,
        "bos_token": tokens.bos,
        "eos_token": tokens.eos,
    })


def _why_not(exc: Exception) -> str:
    """Why a template could not be used, in words for the user."""
    if isinstance(exc, TemplateRaised):
        return f"the model's chat template refused the conversation ({exc})"
    if isinstance(exc, TemplateLimit):
        return f"the model's chat template was stopped: {exc}"
    if isinstance(exc, SecurityError):
        return f"the model's chat template tried to reach outside its sandbox ({exc})"
    if isinstance(exc, TemplateSyntaxError):
        return f"the model's chat template has an error on its line {exc.lineno} ({exc.message})"
    if isinstance(exc, RecursionError):
        return "the model's chat template calls itself without end"
    if isinstance(exc, MemoryError):
        return "the model's chat template ran out of memory"
    detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
    return f"the model's chat template could not be used ({detail})"


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


_FORMAT_NAMES = {"gemma": "Gemma", "chatml": "ChatML", "llama3": "Llama 3", "phi3": "Phi-3"}


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
    name = builtin_format_for(architecture, tokens)
    if template:
        try:
            text = render_embedded(template, messages, tokens)
            return PromptSpec(text, "embedded", _stops_for_template(template))
        except Exception as exc:  # noqa: BLE001 - a template is untrusted code: any failure falls back
            why = _why_not(exc)
            note = f"{why[0].upper()}{why[1:]}; Kestrel used its built-in {_FORMAT_NAMES[name]} format instead."
    write, stops = _BUILTIN[name]
    return PromptSpec(write(messages, tokens), name, stops, note)


def _stops_for_template(template: str) -> tuple[str, ...]:
    """End-of-turn markers a template uses: a guard for models that print them as text."""
    markers = ("<end_of_turn>", "<|im_end|>", "<|eot_id|>", "<|end|>")
    return tuple(marker for marker in markers if marker in template)
