"""Tools, calls and tool results reach real chat templates as transformers gives them.

Each template of tests/fixtures/chat_templates is rendered by Kestrel (render_embedded
with tools, and turns with tool_calls and tool_call_id) and by transformers'
render_jinja_template with the same conversation in transformers' shape: the arguments
of a call as a dict, a tool's result as a "tool" turn naming its call. The two must be
byte-identical, or both must refuse. tests/engine/test_template_conformance.py does the
same without tools.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from transformers.utils import chat_template_utils

from app.engine.templates.chat_format import build_prompt, render_embedded
from app.engine.protocol import ChatMessage, ToolCall
from app.engine.templates import template_builtins
from tests.engine.test_template_conformance import TEMPLATES, TOKENS, Refused, _FixedNow, _outcome

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city today.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "Its name."},
                                                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                   "required": ["city"]}}}
TOOLS = [WEATHER]
CALL = ToolCall(0, "call_abc123", "get_weather", '{"city":"Paris","unit":"celsius"}')
CONVERSATIONS: dict[str, tuple[ChatMessage, ...]] = {
    "tools offered": (ChatMessage("system", "Be brief."), ChatMessage("user", "Weather in Paris?")),
    "a call and its result": (
        ChatMessage("user", "Weather in Paris?"),
        ChatMessage("assistant", "", tool_calls=(CALL,)),
        ChatMessage("tool", "18 degrees and sunny", tool_call_id="call_abc123"),
    ),
    # As Mistral's models write their ids (its templates refuse any other).
    "a call with a nine-character id": (
        ChatMessage("user", "Weather in Paris?"),
        ChatMessage("assistant", "", tool_calls=(ToolCall(0, "a1B2c3D4e", "get_weather", '{"city":"Paris"}'),)),
        ChatMessage("tool", "18 degrees and sunny", tool_call_id="a1B2c3D4e"),
    ),
    "two calls, text and results": (
        ChatMessage("system", "Be brief."),
        ChatMessage("user", "Weather in Paris and Lyon?"),
        ChatMessage("assistant", "Looking.", tool_calls=(CALL, ToolCall(1, "call_def456", "get_weather",
                                                                        '{"city":"Lyon"}'))),
        ChatMessage("tool", "18 degrees", tool_call_id="call_abc123"),
        ChatMessage("tool", "21 degrees", tool_call_id="call_def456"),
        ChatMessage("assistant", "Paris 18, Lyon 21."),
        ChatMessage("user", "Thanks!"),
    ),
}


@pytest.fixture(autouse=True)
def fixed_date(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both renderers see the same date, even across midnight."""
    monkeypatch.setattr(template_builtins, "datetime", _FixedNow)
    monkeypatch.setattr(chat_template_utils, "datetime", _FixedNow)


def _theirs(message: ChatMessage) -> dict[str, Any]:
    turn: dict[str, Any] = {"role": message.role.value, "content": message.content}
    if message.tool_calls:
        turn["tool_calls"] = [{"id": call.id, "type": "function",
                               "function": {"name": call.name, "arguments": json.loads(call.arguments)}}
                              for call in message.tool_calls]
    if message.tool_call_id:
        turn["tool_call_id"] = message.tool_call_id
    return turn


def transformers(template: str, messages: tuple[ChatMessage, ...]) -> str | Refused:
    def rendered() -> str:
        texts, _ = chat_template_utils.render_jinja_template(
            conversations=[[_theirs(m) for m in messages]], tools=TOOLS, chat_template=template,
            add_generation_prompt=True, bos_token=TOKENS.bos, eos_token=TOKENS.eos)
        return str(texts[0])

    return _outcome(rendered)


@pytest.mark.parametrize("conversation", list(CONVERSATIONS))
@pytest.mark.parametrize("name", list(TEMPLATES))
def test_kestrel_gives_tools_and_calls_as_transformers_does(name: str, conversation: str) -> None:
    template = TEMPLATES[name].read_bytes().decode("utf-8")
    messages = CONVERSATIONS[conversation]
    ours = _outcome(lambda: render_embedded(template, messages, TOKENS, tools=TOOLS))
    theirs = transformers(template, messages)
    if isinstance(theirs, Refused):
        assert isinstance(ours, Refused), f"transformers refused ({theirs.error}); Kestrel rendered {ours!r}"
    else:
        assert ours == theirs


def test_the_tools_and_calls_are_in_the_prompt() -> None:
    # So the comparison above can fail: a template that takes tools shows them and the call.
    template = TEMPLATES["Qwen-Qwen3-0.6B"].read_text(encoding="utf-8")
    prompt = render_embedded(template, CONVERSATIONS["a call and its result"], TOKENS, tools=TOOLS)
    assert json.dumps(WEATHER) in prompt
    assert '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}' in prompt
    assert "<tool_response>\n18 degrees and sunny\n</tool_response>" in prompt


@pytest.mark.parametrize(("name", "shown"), [
    ("mistralai-Mistral-Nemo-Instruct-2407", '"id": "'),
    ("Mistral-Small-3.2-24B-Instruct-2506", "[CALL_ID]"),
    ("deepseek-ai-DeepSeek-V3.1", '{"city":"Paris","unit":"celsius"}'),
])
def test_calls_a_template_refuses_as_given_go_as_its_own_models_write_them(name: str, shown: str) -> None:
    # API clients send back the "call_..." ids Kestrel gave; Mistral's templates want 9
    # letters and digits, DeepSeek's the arguments as text. Either way the model's own
    # template renders the turns (no fallback, no note), the same id the same way.
    template = TEMPLATES[name].read_text(encoding="utf-8")
    messages = CONVERSATIONS["a call and its result"]
    assert isinstance(_outcome(lambda: render_embedded(template, messages, TOKENS, tools=TOOLS)), Refused)
    spec = build_prompt(messages, template=template, architecture="llama", tokens=TOKENS, tools=TOOLS)
    again = build_prompt(messages, template=template, architecture="llama", tokens=TOKENS, tools=TOOLS)
    assert spec.chat_format == "embedded" and spec.note is None and spec == again
    assert shown in spec.text and "18 degrees and sunny" in spec.text
