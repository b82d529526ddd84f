"""Prompts from a model's own template (sandboxed) or the built-in format."""

from __future__ import annotations

import pytest

from app.engine.chat_format import ModelTokens, build_prompt
from app.engine.protocol import ChatMessage

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CONVERSATION = (ChatMessage("system", "Be brief."), ChatMessage("user", "Hi"),
                ChatMessage("assistant", "Hello!"), ChatMessage("user", "Why?"))


def test_embedded_template_is_rendered() -> None:
    spec = build_prompt(CONVERSATION, template=CHATML, architecture="llama", tokens=ModelTokens())
    assert spec.chat_format == "embedded"
    assert spec.text.endswith("<|im_start|>user\nWhy?<|im_end|>\n<|im_start|>assistant\n")
    assert spec.stop == ("<|im_end|>",)


def test_gemma_without_template_gets_gemma_turns_with_system_folded_in() -> None:
    spec = build_prompt(CONVERSATION, template=None, architecture="gemma3",
                        tokens=ModelTokens(bos="<bos>", eos="<eos>"))
    assert spec.chat_format == "gemma"
    assert spec.text == (
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
        "<start_of_turn>model\nHello!<end_of_turn>\n"
        "<start_of_turn>user\nWhy?<end_of_turn>\n<start_of_turn>model\n"
    )
    assert "<end_of_turn>" in spec.stop


@pytest.mark.parametrize("attack", [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ messages.__class__.__init__.__globals__ }}",
    "{% set x = messages.append(1) %}{{ x }}",
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
])
def test_hostile_template_cannot_escape_the_sandbox(attack: str) -> None:
    spec = build_prompt(CONVERSATION, template=attack, architecture="qwen2", tokens=ModelTokens())
    assert spec.chat_format == "chatml"
    assert spec.note is not None and "tried to reach outside its sandbox" in spec.note
    assert "uid=" not in spec.text


def test_template_that_raises_falls_back_with_its_reason() -> None:
    template = "{{ raise_exception('System role not supported') }}"
    spec = build_prompt(CONVERSATION, template=template, architecture="llama", tokens=ModelTokens())
    assert spec.chat_format == "chatml"
    assert "System role not supported" in spec.note


def test_tojson_and_strftime_now_work_as_templates_expect() -> None:
    template = "{{ messages[0] | tojson }}|{{ strftime_now('%Y') | length }}"
    spec = build_prompt((ChatMessage("user", "ü"),), template=template, architecture="llama",
                        tokens=ModelTokens())
    assert spec.text == '{"role": "user", "content": "ü"}|4'
