"""A tiny GGUF that calls a tool: Qwen3's chat template, and weights that write one call.

The weights are a lookup table, as in tests/helpers/thinking_gguf.py: each token of a
script calls the next, so greedy or sampled it writes

    Checking.<tool_call>{"name": "get_time", "arguments": {"zone": "UTC"}}</tool_call>

after the generation prompt's newline, then its end-of-turn token. The markers and the
call's JSON are user-defined tokens (printed as text), so no token repeats in the script.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.tiny_gguf import build_tiny_gguf, scripted_weights

QWEN3_TEMPLATE = Path(__file__).resolve().parents[1] / "fixtures" / "chat_templates" / "Qwen-Qwen3-0.6B.jinja"
CALL_JSON = '{"name": "get_time", "arguments": {"zone": "UTC"}}'
TEXT = "Checking."
_SCRIPT = ["<0x0A>", "Checking.", "<tool_call>", CALL_JSON, "</tool_call>"]


def build_tool_call_gguf(path: Path) -> Path:
    return build_tiny_gguf(path, chat_template=QWEN3_TEMPLATE.read_text(encoding="utf-8"), name="kestrel-caller",
                           added_tokens=("Checking.", "<tool_call>", CALL_JSON, "</tool_call>"),
                           weights=scripted_weights(_SCRIPT))
