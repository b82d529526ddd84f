"""Turns a conversation into the prompt text a model was trained on.

The template inside the model file (`tokenizer.chat_template`) comes first. It is
untrusted code from a downloaded file, so it runs in a bounded sandbox
(app/engine/templates/template_sandbox.py). A template that refuses a system prompt gets it folded
into the first user message, the convention of models without a system role. A file
without a template, or one whose template fails in any other way, gets the built-in
format of its architecture. Either way the answer's stats carry what happened
(PromptSpec.note) so the user sees it.

Stop strings come from the model: its end-of-generation tokens and the markers its
template writes at the end of a turn.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import string
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

from jinja2 import TemplateSyntaxError
from jinja2.exceptions import SecurityError

from app.core.conversation import Role
from app.engine.control import PromptCancelled
from app.engine.errors import ModelLoadError
from app.engine.failures import BadTemplate
from app.engine.templates.outside_text import Shield, Spans
from app.engine.protocol import ChatMessage
from app.engine.templates.template_sandbox import TemplateLimit, TemplateRaised, compile_template, render

FOLDED_SYSTEM_NOTE = ("This model's chat template has no system role; Kestrel put your system prompt at "
                      "the start of your first message.")


@dataclass(frozen=True)
class PromptSpec:
    """The rendered prompt and how it was made. plain: where control-token text that came
    from outside stands in text (app/engine/templates/outside_text.py); the backend's tokenizer
    reads it as plain text."""

    text: str
    chat_format: str
    stop: tuple[str, ...]
    note: str | None = None
    plain: Spans = ()


@dataclass(frozen=True)
class ModelTokens:
    """The special tokens a template may refer to, as text, and the texts of the tokens
    that end the model's turn (a guard for a model that writes one out as plain text)."""

    bos: str = ""
    eos: str = ""
    end_of_generation: tuple[str, ...] = ()
    # The tokenizer's other special tokens, which transformers also gives a template:
    # ("unk_token", "<unk>"), ("pad_token", …), sep, cls and mask where the model has them.
    others: tuple[tuple[str, str], ...] = ()


def render_embedded(
    template: str, messages: Sequence[ChatMessage], tokens: ModelTokens, *,
    variables: Mapping[str, Any] | None = None, tools: Sequence[Mapping[str, Any]] | None = None,
    arguments_as_text: bool = False, shield: Shield | None = None, cancelled: Callable[[], bool] | None = None,
) -> str:
    """Render a model's own chat template in the sandbox, with the variables transformers
    passes (no documents: None, as there).

    variables: more for the template (e.g. enable_thinking); like transformers' keyword
    arguments they reach the template and may replace bos_token or eos_token, but never
    the conversation itself. tools: the tools in transformers' shape
    ([{"type": "function", "function": {...}}]), or None as transformers passes none.
    arguments_as_text: a call's arguments go as their JSON text, not as a dict.
    shield: every string of the messages and tools is escaped by it (the caller restores
    the result). cancelled: checked as the template runs (PromptCancelled).
    """
    turns = []
    for index, message in enumerate(messages):
        if cancelled is not None and index % 1024 == 1023 and cancelled():
            raise PromptCancelled()
        turns.append(_template_message(message, arguments_as_text))
    listed = [dict(tool) for tool in tools] if tools is not None else None
    if shield is not None:
        turns, listed = shield.escape(turns), shield.escape(listed)
    return render(template, {
        **dict(tokens.others),
        "bos_token": tokens.bos,
        "eos_token": tokens.eos,
        "add_generation_prompt": True,
        "tools": listed,
        "documents": None,
        **(variables or {}),
        "messages": turns,
    }, cancelled=cancelled)


def _template_message(message: ChatMessage, arguments_as_text: bool = False) -> dict[str, Any]:
    """A turn as transformers gives it to a template. An earlier answer's thinking goes
    under both names transformers' templates read (each decides whether it is shown); an
    answer's calls go as tool_calls with their arguments as a dict, which is what the
    templates expect (they write `arguments | tojson`); a tool's result names its call."""
    turn: dict[str, Any] = {"role": message.role.value, "content": message.content}
    if message.thinking:
        turn = {"thinking": message.thinking, **turn, "reasoning_content": message.thinking}
    if message.tool_calls:
        turn["tool_calls"] = [{"id": call.id, "type": "function",
                               "function": {"name": call.name, "arguments": call.arguments if arguments_as_text
                                            else _arguments(call.arguments)}}
                              for call in message.tool_calls]
    if message.tool_call_id:
        turn["tool_call_id"] = message.tool_call_id
    return turn


def _arguments(text: str) -> Any:
    """A call's arguments as a dict; text that is not a JSON object stays text."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, dict) else text


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


def fold_system(messages: Sequence[ChatMessage]) -> list[ChatMessage] | None:
    """The conversation with its system text at the start of the first user message
    (system + blank line + message), as models without a system role are taught;
    None when there is no system text or no user message to carry it."""
    system = "\n\n".join(m.content for m in messages if m.role == Role.SYSTEM)
    rest = [m for m in messages if m.role != Role.SYSTEM]
    first_user = next((i for i, m in enumerate(rest) if m.role == Role.USER), None)
    if not system or first_user is None:
        return None
    message = rest[first_user]
    rest[first_user] = ChatMessage(Role.USER, f"{system}\n\n{message.content}")
    return rest


# --- the built-in formats --------------------------------------------------------------


def _gemma(messages: Sequence[ChatMessage], tokens: ModelTokens) -> str:
    # Gemma has no system role: the system text opens the first user turn.
    parts = [tokens.bos]
    for message in fold_system(messages) or messages:
        role = "model" if message.role == Role.ASSISTANT else "user"
        parts.append(f"<start_of_turn>{role}\n{message.content.strip()}<end_of_turn>\n")
    parts.append("<start_of_turn>model\n")
    return "".join(parts)


def _chatml(messages: Sequence[ChatMessage], tokens: ModelTokens) -> str:
    parts = [f"<|im_start|>{m.role.value}\n{m.content}<|im_end|>\n" for m in messages]
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def _llama3(messages: Sequence[ChatMessage], tokens: ModelTokens) -> str:
    parts = [tokens.bos]
    for m in messages:
        parts.append(
            f"<|start_header_id|>{m.role.value}<|end_header_id|>\n\n{m.content.strip()}<|eot_id|>"
        )
    parts.append("<|start_header_id|>assistant<|end_header_id|>\n\n")
    return "".join(parts)


def _phi3(messages: Sequence[ChatMessage], tokens: ModelTokens) -> str:
    parts = [f"<|{m.role.value}|>\n{m.content}<|end|>\n" for m in messages]
    parts.append("<|assistant|>\n")
    return "".join(parts)


# name -> (writer, the marker it ends each turn with, its name for the user)
_BUILTIN = {
    "gemma": (_gemma, "<end_of_turn>", "Gemma"),
    "chatml": (_chatml, "<|im_end|>", "ChatML"),
    "llama3": (_llama3, "<|eot_id|>", "Llama 3"),
    "phi3": (_phi3, "<|end|>", "Phi-3"),
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


# --- the prompt ------------------------------------------------------------------------


def build_prompt(
    messages: Sequence[ChatMessage],
    *,
    template: str | None,
    architecture: str,
    tokens: ModelTokens,
    variables: Mapping[str, Any] | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    shield: Shield | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> PromptSpec:
    """The prompt for a conversation, from the model's template or a built-in format.

    variables, tools: more for the model's template (see render_embedded); the built-in
    formats take neither. shield: the outside text's control-token text is kept out of
    the template's reach and its places put in PromptSpec.plain. cancelled: looked at
    while the template runs; PromptCancelled when it says so.
    """
    note = None
    name = builtin_format_for(architecture, tokens)
    if template:
        try:
            spec = _from_template(template, messages, tokens, variables, tools, shield, cancelled)
        except PromptCancelled:
            raise
        except Exception as exc:  # noqa: BLE001 - a template is untrusted code: any failure falls back
            why = _why_not(exc)
            note = f"{why[0].upper()}{why[1:]}; Kestrel used its built-in {_BUILTIN[name][2]} format instead."
        else:
            return _restored(spec, shield)
    write, marker, _ = _BUILTIN[name]
    if shield is not None:
        messages = _escaped(messages, shield, cancelled)
    return _restored(PromptSpec(write(messages, tokens), name, _stops((marker,), tokens), note), shield)


def _escaped(messages: Sequence[ChatMessage], shield: Shield,
             cancelled: Callable[[], bool] | None) -> list[ChatMessage]:
    """The messages with their content escaped (for the built-in formats, which write content only)."""
    escaped = []
    for index, message in enumerate(messages):
        if cancelled is not None and index % 1024 == 1023 and cancelled():
            raise PromptCancelled()
        content = shield.escape_text(message.content)
        escaped.append(message if content is message.content else dataclasses.replace(message, content=content))
    return escaped


def _restored(spec: PromptSpec, shield: Shield | None) -> PromptSpec:
    if shield is None:
        return spec
    text, plain = shield.restore(spec.text)
    return dataclasses.replace(spec, text=text, plain=plain)


def _from_template(template: str, messages: Sequence[ChatMessage], tokens: ModelTokens,
                   variables: Mapping[str, Any] | None, tools: Sequence[Mapping[str, Any]] | None,
                   shield: Shield | None = None, cancelled: Callable[[], bool] | None = None) -> PromptSpec:
    """The template's prompt; a refused system prompt is folded into the first user
    message and tried once more. Raises the template's first error otherwise."""
    try:
        text = _render_calls(template, messages, tokens, variables, tools, shield, cancelled)
        note = None
    except TemplateRaised as refusal:
        folded = fold_system(messages)
        if folded is None:
            raise
        try:
            text = _render_calls(template, folded, tokens, variables, tools, shield, cancelled)
        except PromptCancelled:
            raise
        except Exception:  # noqa: BLE001 - the first refusal says best why the template was not used
            raise refusal from None
        note = FOLDED_SYSTEM_NOTE
    return PromptSpec(text, "embedded", _stops(template_turn_markers(template, tokens.bos, tokens.eos), tokens), note)


def _render_calls(template: str, messages: Sequence[ChatMessage], tokens: ModelTokens,
                  variables: Mapping[str, Any] | None, tools: Sequence[Mapping[str, Any]] | None,
                  shield: Shield | None = None, cancelled: Callable[[], bool] | None = None) -> str:
    """render_embedded; a template that refuses earlier calls as transformers gives them
    gets them as its own models wrote them: Mistral's want ids of 9 letters and digits
    (and refuse the "call_..." ids API clients send back), DeepSeek's the arguments as
    JSON text, gpt-oss's a calling turn's thinking or its text, not both (its text stays:
    the user saw it). Raises the first refusal when none helps."""
    try:
        return render_embedded(template, messages, tokens, variables=variables, tools=tools, shield=shield,
                               cancelled=cancelled)
    except (TemplateRaised, TypeError) as refusal:
        if not any(m.tool_calls or m.tool_call_id for m in messages):
            raise
        unthought = [dataclasses.replace(m, thinking="") if m.tool_calls and m.content else m for m in messages]
        for turns, as_text in ((_nine_character_ids(messages), False), (messages, True), (unthought, False)):
            try:
                return render_embedded(template, turns, tokens, variables=variables, tools=tools,
                                       arguments_as_text=as_text, shield=shield, cancelled=cancelled)
            except (TemplateRaised, TypeError):
                continue
        raise refusal


def _nine_character_ids(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The turns with every call id made 9 letters and digits, the same id the same way."""

    def nine(call_id: str) -> str:
        if len(call_id) == 9 and call_id.isascii() and call_id.isalnum():
            return call_id
        digest = int.from_bytes(hashlib.sha256(call_id.encode("utf-8")).digest()[:8], "big")
        return "".join(_ALPHANUMERIC[(digest >> (6 * i)) % len(_ALPHANUMERIC)] for i in range(9))

    return [dataclasses.replace(m, tool_calls=tuple(dataclasses.replace(c, id=nine(c.id)) for c in m.tool_calls),
                                tool_call_id=nine(m.tool_call_id) if m.tool_call_id else "") for m in messages]


_ALPHANUMERIC = string.ascii_letters + string.digits


def end_of_turn_markers(template: str | None, architecture: str, tokens: ModelTokens) -> tuple[str, ...]:
    """The markers that may end the model's turn: its template's, and its built-in
    format's. A backend looks among their tokens for the model's end-of-generation ones."""
    found = template_turn_markers(template, tokens.bos, tokens.eos) if template else ()
    return _unique(found + (_BUILTIN[builtin_format_for(architecture, tokens)][1],))


# A special token as templates write one: <|im_end|>, <end_of_turn>, </s>, <｜end▁of▁sentence｜>,
# [/INST]. Words and punctuation of ordinary text do not look like this.
_TOKEN_LIKE = re.compile(r"<[^<>\s]{1,48}>|\[/?[A-Z][A-Z_]{1,30}\]")
_PROBE = (ChatMessage(Role.USER, "KestrelProbeQuestion"), ChatMessage(Role.ASSISTANT, "KestrelProbeAnswer"),
          ChatMessage(Role.USER, "KestrelProbeFollowUp"))


@lru_cache(maxsize=8)
def template_turn_markers(template: str, bos: str, eos: str) -> tuple[str, ...]:
    """The special-token-like text a template writes right after a message's content
    (<|im_end|> in ChatML, <end_of_turn> in Gemma's, the eos token in Mistral's), found by
    rendering a short probe conversation; none when the template fails on it."""
    try:
        text = render_embedded(template, _PROBE, ModelTokens(bos, eos))
    except Exception:  # noqa: BLE001 - a template that fails gives no markers; build_prompt says why
        return ()
    found = []
    for message in _PROBE:
        start = text.find(message.content)
        if start >= 0:
            marker = _TOKEN_LIKE.match(text[start + len(message.content):].lstrip())
            found.append(marker.group() if marker else "")
    return _unique(tuple(found))


def _stops(markers: tuple[str, ...], tokens: ModelTokens) -> tuple[str, ...]:
    return _unique(markers + tokens.end_of_generation)


def _unique(texts: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(text for text in texts if text))


def template_in_use(file_template: str | None, override: str | None) -> tuple[str | None, str]:
    """The template a model is prompted with and what Loaded.chat_format calls it.

    A template set in the model's settings replaces the file's; one that does not
    compile is refused when the model loads (ModelLoadError), not at the first answer.
    """
    if override is None:
        return file_template, "embedded" if file_template else "builtin"
    try:
        compile_template(override)
    except (TemplateSyntaxError, TemplateLimit) as exc:
        why = _why_not(exc).replace("the model's chat template", "it")
        raise ModelLoadError(BadTemplate(why)) from exc
    return override, "override"

