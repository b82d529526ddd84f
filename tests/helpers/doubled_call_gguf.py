"""A tiny GGUF that writes its tool call in doubled braces, as Qwen2.5-Coder 1.5B copies them.

Qwen2.5's own template (tests/fixtures/tool_calls/templates/Qwen2.5-Coder-1.5B-Instruct.jinja)
prints its call example as `{{"name": <function-name>, ...}}`, and without a system prompt the
1.5B model answered a tool's result with `{{"name": "get_weather", "arguments": {"city":
"Paris"}}}` (issue 37). The weights are a lookup table (tests/helpers/tiny_gguf.scripted_weights):
after the generation prompt's newline they write DOUBLED_CALL, then the end-of-turn token.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.tiny_gguf import build_tiny_gguf, scripted_weights

TEMPLATES = Path(__file__).resolve().parents[1] / "fixtures" / "tool_calls" / "templates"
QWEN25_DOUBLED_TEMPLATE = TEMPLATES / "Qwen2.5-Coder-1.5B-Instruct.jinja"
DOUBLED_CALL = '{{"name": "get_time", "arguments": {"zone": "UTC"}}}'


def build_doubled_call_gguf(path: Path, template: Path = QWEN25_DOUBLED_TEMPLATE) -> Path:
    """The model with `template` as its chat template (Qwen2.5's by default)."""
    return build_tiny_gguf(path, chat_template=template.read_text(encoding="utf-8"), name="kestrel-doubled",
                           added_tokens=(DOUBLED_CALL,), weights=scripted_weights(["<0x0A>", DOUBLED_CALL]))
