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

from tests.helpers.tiny_gguf import FIRST_BYTE_ID, IM_END_ID, build_tiny_gguf

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
_SIZE = 10.0  # the script token's embedding on its own dimension
_PULL = 50.0  # how strongly a script token calls the next one


def build_thinking_gguf(path: Path) -> Path:
    return build_tiny_gguf(path, chat_template=THINKING_TEMPLATE, name="kestrel-thinker",
                           added_tokens=("<think>", "</think>"), weights=_scripted)


def _scripted(pieces: list[str], tensors: dict[str, np.ndarray]) -> None:
    ids = {piece: number for number, piece in enumerate(pieces)}
    assert ids[_NEWLINE] == FIRST_BYTE_ID + 10
    chain = [ids[piece] for piece in _SCRIPT] + [IM_END_ID]
    for name, tensor in tensors.items():
        if name.endswith(("attn_output.weight", "ffn_down.weight")):
            tensor[:] = 0.0  # layers add nothing: the last token alone decides the next
    embedding, output = tensors["token_embd.weight"], tensors["output.weight"]
    output[:] = 0.0
    for step, (token, following) in enumerate(zip(chain, chain[1:]), start=1):
        embedding[token, 1:] = 0.0
        embedding[token, step] = _SIZE
        output[following, step] = _PULL
