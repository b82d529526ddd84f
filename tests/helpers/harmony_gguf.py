"""A tiny GGUF that answers in harmony, as gpt-oss does: thinking on the analysis channel.

The weights are a lookup table, as in tests/helpers/thinking_gguf.py: each token of a
script calls the next, so greedy or sampled, after the generation prompt `<|start|>assistant`
it writes

    <|channel|>analysis<|message|> think about it first<|end|><|start|>assistant<|channel|>final<|message|> hello world!<|return|>

or, built with build_harmony_caller_gguf, a call instead of the final message:

    …<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city":"Oslo"}<|call|>

The harmony tokens are control tokens, as in gpt-oss's GGUF, so llama.cpp decides as it
does for gpt-oss: it prints `<|start|>`, `<|channel|>` and `<|message|>` (it makes them
user-defined), and since `<|return|>` and `<|call|>` are there, `<|end|>` is no longer an
end-of-generation token (made user-defined as well: it prints too). No token may repeat in a lookup
table's script, so the second header (which would repeat `<|channel|>` and `<|message|>`)
is one user-defined token printed as the same text.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.tiny_gguf import build_tiny_gguf, scripted_weights

HARMONY_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' and message.tool_calls %}"
    "{{ '<|start|>assistant to=functions.' + message.tool_calls[0].function.name + '<|channel|>commentary json"
    "<|message|>' + message.tool_calls[0].function.arguments | tojson + '<|call|>' }}"
    "{% elif message['role'] == 'assistant' %}"
    "{% if message.thinking and loop.last %}"
    "{{ '<|start|>assistant<|channel|>analysis<|message|>' + message.thinking + '<|end|>' }}{% endif %}"
    "{{ '<|start|>assistant<|channel|>final<|message|>' + message['content'] + '<|end|>' }}"
    "{% else %}"
    "{{ '<|start|>' + message['role'] + '<|message|>' + message['content'] + '<|end|>' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start|>assistant' }}{% endif %}"
)
THOUGHT = "think about it first"
ANSWER = "hello world!"
CALL_NAME = "get_weather"
CALL_ARGUMENTS = '{"city":"Oslo"}'
HARMONY_TOKENS = ("<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>", "<|constrain|>")
_FINAL_HEADER = "assistant<|channel|>final<|message|>"
_CALL_HEADER = f"assistant to=functions.{CALL_NAME}<|channel|>commentary json<|message|>"
_THINKING = ["assistant", "<|channel|>", "analysis", "<|message|>", "\u2581think", "\u2581about", "\u2581it",
             "\u2581first", "<|end|>", "<|start|>"]
ANSWER_SCRIPT = _THINKING + [_FINAL_HEADER, "\u2581hello", "\u2581world", "!", "<|return|>"]
CALL_SCRIPT = _THINKING + [_CALL_HEADER, CALL_ARGUMENTS, "<|call|>"]


def build_harmony_gguf(path: Path) -> Path:
    """The model that thinks, then answers on the final channel."""
    return _build(path, ANSWER_SCRIPT, "kestrel-harmony", only_script_rows=False)


def build_harmony_caller_gguf(path: Path) -> Path:
    """The model that thinks, then calls get_weather on the commentary channel (other
    tokens keep their random output rows: under the call's grammar the sampler has choices)."""
    return _build(path, CALL_SCRIPT, "kestrel-harmony-caller", only_script_rows=True)


def _build(path: Path, script: list[str], name: str, *, only_script_rows: bool) -> Path:
    added = ("assistant", "analysis", _FINAL_HEADER, _CALL_HEADER, CALL_ARGUMENTS)
    return build_tiny_gguf(path, chat_template=HARMONY_TEMPLATE, name=name, added_tokens=added,
                           control_tokens=HARMONY_TOKENS,
                           weights=scripted_weights(script, only_script_rows=only_script_rows))
