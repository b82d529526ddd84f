"""A tiny GGUF that thinks: a scripted reasoning model for tests of the thinking pipeline.

Its weights make it a lookup table: every layer's output projections are zero, so the
residual stream holds only the current token's embedding, and the output matrix maps
each token of a script to the next one. Greedy or sampled, it writes the same thing:

    <think> think about it first </think> hello world!   (then its end-of-turn token)

after a prompt ending in a newline (the generation prompt), and only the answer after a
prompt ending in `</think>` (its template's "thinking off": Qwen3's `enable_thinking`).
The markers are user-defined tokens, printed as text, as in Qwen3 and DeepSeek-R1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.helpers.tiny_gguf import FIRST_BYTE_ID, build_tiny_gguf, scripted_weights

# Qwen3's switch, reduced: thinking off writes an empty, closed block into the prompt.
THINKING_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['role'] == 'assistant' and message.reasoning_content and loop.last %}"
    "{{ '<think>\\n' + message.reasoning_content + '\\n</think>\\n\\n' }}{% endif %}"
    "{{ message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>' }}{% endif %}"
    "{% endif %}"
)
THOUGHT = "think about it first"
ANSWER = "hello world!"
_NEWLINE = "<0x0A>"
_SCRIPT = [_NEWLINE, "<think>", "\u2581think", "\u2581about", "\u2581it", "\u2581first", "</think>",
           "\u2581hello", "\u2581world", "!"]


def build_thinking_gguf(path: Path) -> Path:
    return build_tiny_gguf(path, chat_template=THINKING_TEMPLATE, name="kestrel-thinker",
                           added_tokens=("<think>", "</think>"), weights=_scripted)


def _scripted(pieces: list[str], tensors: dict[str, np.ndarray]) -> None:
    assert pieces.index(_NEWLINE) == FIRST_BYTE_ID + 10
    scripted_weights(_SCRIPT)(pieces, tensors)
