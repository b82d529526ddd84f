"""Prompts from a model's own template (sandboxed) or the built-in format."""

from __future__ import annotations

import struct

from pathlib import Path

import pytest

from app.engine.backends.backend import DeviceChoice
from app.engine.templates.chat_format import ModelTokens, build_prompt, fold_system, render_embedded
from app.engine.backends.llama.gguf_backend import GgufBackend
from app.engine.backends.onnx.onnx_backend import OnnxBackend
from app.engine.protocol import ChatMessage, Load

TINY_ONNX = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-onnx"

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


# --- a template that refuses the system prompt -----------------------------------------

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "chat_templates"
GEMMA2 = (FIXTURES / "google-gemma-2-2b-it.jinja").read_bytes().decode("utf-8")
QWEN3 = (FIXTURES / "Qwen-Qwen3-0.6B.jinja").read_bytes().decode("utf-8")
LLAMA32 = (FIXTURES / "meta-llama-Llama-3.2-3B-Instruct.jinja").read_bytes().decode("utf-8")
GEMMA_TOKENS = ModelTokens(bos="<bos>", eos="<eos>", end_of_generation=("<eos>", "<end_of_turn>"))


def test_a_refused_system_prompt_goes_into_the_first_message_in_the_models_own_format() -> None:
    """Gemma 2's template raises 'System role not supported'; its authors fold it in."""
    spec = build_prompt(CONVERSATION, template=GEMMA2, architecture="gemma2", tokens=GEMMA_TOKENS)
    assert spec.chat_format == "embedded"
    assert spec.text == (
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
        "<start_of_turn>model\nHello!<end_of_turn>\n"
        "<start_of_turn>user\nWhy?<end_of_turn>\n<start_of_turn>model\n"
    )
    assert spec.note == ("This model's chat template has no system role; Kestrel put your system prompt "
                         "at the start of your first message.")


def test_without_a_system_prompt_there_is_nothing_to_fold_and_no_note() -> None:
    spec = build_prompt(CONVERSATION[1:], template=GEMMA2, architecture="gemma2", tokens=GEMMA_TOKENS)
    assert spec.chat_format == "embedded" and spec.note is None
    assert spec.text.startswith("<bos><start_of_turn>user\nHi<end_of_turn>\n")


def test_when_folding_does_not_help_the_built_in_format_says_the_first_refusal() -> None:
    # Two user messages in a row: the template refuses with or without the system prompt.
    messages = (ChatMessage("system", "Be brief."), ChatMessage("user", "Hi"), ChatMessage("user", "Hello?"))
    spec = build_prompt(messages, template=GEMMA2, architecture="gemma2", tokens=GEMMA_TOKENS)
    assert spec.chat_format == "gemma"
    assert spec.note == ("The model's chat template refused the conversation (System role not supported); "
                         "Kestrel used its built-in Gemma format instead.")


def test_fold_system_joins_every_system_text_into_the_first_user_message() -> None:
    messages = (ChatMessage("system", "One."), ChatMessage("assistant", "Hey"), ChatMessage("system", "Two."),
                ChatMessage("user", "Hi"), ChatMessage("user", "Again"))
    assert fold_system(messages) == [ChatMessage("assistant", "Hey"), ChatMessage("user", "One.\n\nTwo.\n\nHi"),
                                     ChatMessage("user", "Again")]
    assert fold_system(CONVERSATION[1:]) is None
    assert fold_system((ChatMessage("system", "Alone."),)) is None


# --- stop strings from the model --------------------------------------------------------


@pytest.mark.parametrize("template, tokens, stops", [
    (CHATML, ModelTokens(eos="<|endoftext|>", end_of_generation=("<|endoftext|>", "<|im_end|>")),
     ("<|im_end|>", "<|endoftext|>")),
    (LLAMA32, ModelTokens(bos="<|begin_of_text|>", eos="<|eot_id|>",
                          end_of_generation=("<|end_of_text|>", "<|eom_id|>", "<|eot_id|>")),
     ("<|eot_id|>", "<|end_of_text|>", "<|eom_id|>")),
    (GEMMA2, GEMMA_TOKENS, ("<end_of_turn>", "<eos>")),
    # Alpaca-style plain-text turns carry no marker: only the model's own tokens stop it.
    ("{% for m in messages %}### {{ m.role }}:\n{{ m.content }}\n\n{% endfor %}### assistant:\n",
     ModelTokens(eos="</s>", end_of_generation=("</s>",)), ("</s>",)),
], ids=["chatml", "llama 3.2", "gemma 2", "plain text"])
def test_stops_are_the_templates_turn_markers_and_the_models_end_tokens(
        template: str, tokens: ModelTokens, stops: tuple[str, ...]) -> None:
    spec = build_prompt(CONVERSATION[1:], template=template, architecture="llama", tokens=tokens)
    assert spec.chat_format == "embedded", spec.note
    assert spec.stop == stops


def test_a_built_in_format_stops_at_its_own_marker_and_the_models_end_tokens() -> None:
    spec = build_prompt(CONVERSATION, template=None, architecture="gemma3", tokens=GEMMA_TOKENS)
    assert spec.stop == ("<end_of_turn>", "<eos>")


def test_a_ggufs_end_of_generation_tokens_come_from_the_model(tiny_model: Path) -> None:
    """The tiny GGUF names </s> as eos and <|im_end|> as eot; its ChatML template ends turns with <|im_end|>."""
    backend = GgufBackend.load(Load(request_id=1, model_path=str(tiny_model), context_length=256),
                               DeviceChoice("cpu", "test"))
    try:
        assert backend._tokens.end_of_generation == ("</s>", "<|im_end|>")
        assert backend._spec(CONVERSATION).stop == ("<|im_end|>", "</s>")
        # transformers gives a template the tokenizer's other special tokens too.
        assert backend._tokens.others == (("unk_token", "<unk>"),)
    finally:
        backend.close()


def test_other_special_tokens_reach_the_template() -> None:
    tokens = ModelTokens(bos="<s>", eos="</s>", others=(("unk_token", "<unk>"), ("pad_token", "<pad>")))
    assert render_embedded("{{ unk_token }}|{{ pad_token }}|{{ bos_token }}", CONVERSATION, tokens) == "<unk>|<pad>|<s>"


def test_a_special_token_id_past_the_vocabulary_is_ignored_not_an_abort(tiny_model: Path, tmp_path: Path) -> None:
    data = bytearray(tiny_model.read_bytes())
    key = b"tokenizer.ggml.unknown_token_id"
    at = data.index(key) + len(key) + 4  # after the key, its uint32 type
    struct.pack_into("<I", data, at, 4_000_000)
    damaged = tmp_path / "unk past the end.gguf"
    damaged.write_bytes(data)
    backend = GgufBackend.load(Load(request_id=1, model_path=str(damaged), context_length=256),
                               DeviceChoice("cpu", "test"))
    try:
        assert backend._tokens.others == ()
    finally:
        backend.close()


def test_an_onnx_models_end_tokens_are_its_genai_config_eos_ids_decoded() -> None:
    backend = OnnxBackend.load(Load(request_id=1, model_path=str(TINY_ONNX), context_length=256),
                               DeviceChoice("cpu", "test"))
    try:
        assert backend._tokens.end_of_generation == ("<|im_end|>", "<|endoftext|>")
        # The answer's text still leaves special tokens out.
        assert backend._tokenizer.decode(backend._tokenizer.encode("hi<|im_end|>")) == "hi"
    finally:
        backend.close()


@pytest.mark.starter
def test_the_starter_models_end_tokens_include_gemmas_end_of_turn(small_real_model: Path) -> None:
    backend = GgufBackend.load(Load(request_id=1, model_path=str(small_real_model), context_length=512),
                               DeviceChoice("cpu", "test"))
    try:
        assert backend._tokens.end_of_generation == ("<eos>", "<end_of_turn>")
        assert backend._spec(CONVERSATION).stop == ("<end_of_turn>", "<eos>")
    finally:
        backend.close()


# --- variables for the template --------------------------------------------------------


def test_a_callers_variables_reach_the_template() -> None:
    question = (ChatMessage("user", "Hi"),)
    on = build_prompt(question, template=QWEN3, architecture="qwen3", tokens=ModelTokens())
    off = build_prompt(question, template=QWEN3, architecture="qwen3", tokens=ModelTokens(),
                       variables={"enable_thinking": False})
    assert on.text == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert off.text == on.text + "<think>\n\n</think>\n\n"


def test_variables_may_replace_the_special_tokens_but_never_the_conversation() -> None:
    template = "{{ bos_token }}{% for m in messages %}{{ m.content }};{% endfor %}{{ flavour }}"
    text = render_embedded(template, CONVERSATION[1:2], ModelTokens(bos="<s>"),
                           variables={"messages": [{"role": "user", "content": "forged"}],
                                      "bos_token": "<BOS>", "flavour": "mint"})
    assert text == "<BOS>Hi;mint"


def test_earlier_thinking_reaches_the_template_under_transformers_names() -> None:
    template = "{% for m in messages %}[{{ m.reasoning_content }}|{{ m.thinking }}|{{ m.content }}]{% endfor %}"
    messages = (ChatMessage("user", "Hi"), ChatMessage("assistant", "Hello", thinking="greet back"))
    assert render_embedded(template, messages, ModelTokens()) == "[||Hi][greet back|greet back|Hello]"
