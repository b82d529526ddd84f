"""The chat-template sandbox: bounded in time, output and memory, and what transformers gives
a template. Each hostile template here ran for minutes or took gigabytes before the limits."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest
from jinja2.exceptions import SecurityError, UndefinedError

from app.engine.templates.chat_format import ModelTokens, build_prompt
from app.engine.control import PromptCancelled
from app.engine.protocol import ChatMessage
from app.engine.templates.template_sandbox import TemplateLimit, render

CONVERSATION = (ChatMessage("system", "Be brief."), ChatMessage("user", "Hi"),
                ChatMessage("assistant", "Hello!"), ChatMessage("user", "Why?"))
VARIABLES = {"messages": [{"role": "user", "content": "hé"}], "add_generation_prompt": True}

# name -> (template, words the refusal must contain)
HOSTILE = {
    "repeat": ("{{ 'x' * 10**9 }}", "repeat text"),
    "nested loops": ("{% for i in range(100000) %}{% for j in range(100000) %}{{ '' }}{% endfor %}{% endfor %}",
                     "still running after"),
    "format filter width": ("{{ '%01000000000d'|format(1) }}", "characters wide"),
    "% operator width": ("{{ '%01000000000d' % 1 }}", "characters wide"),
    "str.format width": ("{{ '{:>1000000000}'.format(1) }}", "characters wide"),
    "tojson indent": ("{{ messages|tojson(indent=10**9) }}", "tojson"),
    "center filter": ("{{ 'x'|center(10**9) }}", "center"),
    "center method": ("{{ 'x'.center(10**9) }}", "center"),
    "strftime repeat": ("{{ strftime_now('%Y' * 100000000) }}", "repeat text"),
    "strftime width": ("{{ strftime_now('%1000000000Y') }}", "format a date"),
    "lipsum": ("{{ lipsum(n=3e6) }}", "lipsum"),
    "lipsum below the number limit": ("{{ lipsum(n=900000) }}", "paragraphs"),
    "power": ("{{ 10**(10**8) }}", "power"),
    "squaring": ("{% set ns = namespace(n=3) %}{% for i in range(40) %}{% set ns.n = ns.n * ns.n %}"
                 "{% endfor %}{{ ns.n }}", "multiply numbers"),
    # In parts of 100,000 characters: the output bound is met after 80 of them, long before the time limit
    # (in parts of 500 the 16,000 loops under the tracer ran past the 2 s limit on a slow CI host).
    "100 MB of output": ("{% for i in range(1000) %}{{ 'y' * 100000 }}{% endfor %}", "write more than"),
    "doubling with ~": ("{% set ns = namespace(x='ab') %}{% for i in range(40) %}{% set ns.x = ns.x ~ ns.x %}"
                        "{% endfor %}{{ ns.x }}", "join text"),
    "doubling with +": ("{% set ns = namespace(x='ab') %}{% for i in range(40) %}{% set ns.x = ns.x + ns.x %}"
                        "{% endfor %}{{ ns.x }}", "add up text"),
    "macro buffer": ("{% macro m(s) %}{% for i in range(10000) %}{{ s }}{% endfor %}{% endmacro %}"
                     "{% set s = 'z' * 100000 %}{{ m(s)|length }}", "join text"),
    "quadratic replace": ("{% set s = 'a' * 100000 %}{{ s|replace('a', s)|length }}", "replace into text"),
    "quadratic replace method": ("{% set s = 'a' * 100000 %}{{ s.replace('a', s)|length }}", "replace into text"),
    "join of one big string": ("{% set s = 'a' * 100000 %}{{ ([s] * 100000)|join|length }}", "join text"),
    "indent by a long string": ("{% set s = '\n' * 100000 %}{{ s|indent('x' * 100000)|length }}", "indent text"),
    "expandtabs": ("{% set s = '\t' * 100000 %}{{ s.expandtabs(100000)|length }}", "expand tabs"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_template_is_stopped_quickly_in_bounded_memory(name: str) -> None:
    template, words = HOSTILE[name]
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(TemplateLimit, match=words):
            render(template, VARIABLES)
        seconds = time.monotonic() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seconds < 5
    assert peak < 100 * 2**20


def test_a_stopped_template_falls_back_and_says_why() -> None:
    spec = build_prompt(CONVERSATION, template="{{ 'x' * 10**9 }}", architecture="qwen2", tokens=ModelTokens())
    assert spec.chat_format == "chatml"
    assert spec.note == ("The model's chat template was stopped: it tried to repeat text of at least "
                         "1,000,000,000 characters, more than a chat prompt can use; Kestrel used its "
                         "built-in ChatML format instead.")


@pytest.mark.parametrize("template, words", [
    ("{% for m in messages %}{{ m.content }", "has an error on its line 1"),
    ("{{ 1 / 0 }}", "could not be used (division by zero)"),
    ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "calls itself without end"),
    ("{{ 10.0 ** 400 }}", "could not be used ("),
    ("{{ messages[7].content }}", "could not be used ("),
    ("{{ 'x'.encode('no such codec') }}", "could not be used (unknown encoding: no such codec)"),
])
def test_any_template_error_falls_back_with_a_reason_in_words(template: str, words: str) -> None:
    spec = build_prompt(CONVERSATION, template=template, architecture="gemma3", tokens=ModelTokens())
    assert spec.chat_format == "gemma"
    assert spec.note is not None and words in spec.note and "Gemma format" in spec.note
    assert "Traceback" not in spec.note


def test_real_templates_render_fast_and_unchanged_under_the_limits() -> None:
    """A long conversation through a template with loops, macros and filters."""
    template = ("{% macro turn(m) %}<|im_start|>{{ m.role }}\n{{ m.content|trim }}<|im_end|>\n{% endmacro %}"
                "{% for m in messages %}{{ turn(m) }}{% endfor %}<|im_start|>assistant\n")
    messages = [ChatMessage("user" if i % 2 == 0 else "assistant", f"message {i} " * 20) for i in range(2000)]
    started = time.monotonic()
    spec = build_prompt(messages, template=template, architecture="qwen2", tokens=ModelTokens())
    assert spec.chat_format == "embedded", spec.note
    assert spec.text.count("<|im_start|>") == 2001
    assert time.monotonic() - started < 2


# --- what transformers gives a template --------------------------------------------


def test_loop_controls_work() -> None:
    template = "{% for m in messages %}{% if m.role == 'system' %}{% continue %}{% endif %}{{ m.content }};" \
               "{% if m.role == 'assistant' %}{% break %}{% endif %}{% endfor %}"
    assert render(template, {"messages": [m.__dict__ for m in CONVERSATION]}) == "Hi;Hello!;"


def test_generation_block_renders_its_body() -> None:
    template = "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}[{{ m.content }}]" \
               "{% endgeneration %}{% endif %}{% endfor %}"
    assert render(template, {"messages": [m.__dict__ for m in CONVERSATION]}) == "[Hello!]"


def test_tools_and_documents_are_none_as_in_transformers() -> None:
    template = "{% if tools is not none %}TOOLS{% endif %}{% if documents is none %}no documents{% endif %}" \
               "{% if tools is defined %} (tools defined){% endif %}"
    spec = build_prompt(CONVERSATION, template=template, architecture="qwen2", tokens=ModelTokens())
    assert spec.text == "no documents (tools defined)"


def test_tojson_takes_json_dumps_keywords() -> None:
    value = {"b": "ü", "a": [1, 2]}
    template = "{{ v|tojson }}|{{ v|tojson(ensure_ascii=True, separators=(',', ':'), sort_keys=True) }}|" \
               "{{ v|tojson(indent=2) }}"
    indented = '{\n  "b": "ü",\n  "a": [\n    1,\n    2\n  ]\n}'
    assert render(template, {"v": value}) == '{"b": "ü", "a": [1, 2]}|{"a":[1,2],"b":"\\u00fc"}|' + indented


def test_the_trace_function_of_a_debugger_is_put_back() -> None:
    import sys

    def tracer(frame, event, arg):  # noqa: ANN001
        return None

    sys.settrace(tracer)
    try:
        render("{{ 1 }}", {})
        assert sys.gettrace() is tracer
    finally:
        sys.settrace(None)


def test_a_template_with_a_syntax_error_does_not_stop_the_model_loading(tmp_path: Path) -> None:
    """llama-cpp-python compiled the file's template while loading and failed the load."""
    from app.engine.backends.backend import DeviceChoice
    from app.engine.backends.llama.gguf_backend import GgufBackend
    from app.engine.protocol import Generate, GenerationSettings, Load
    from app.engine.control import GenerationControl
    from tests.helpers.tiny_gguf import build_tiny_gguf

    model = build_tiny_gguf(tmp_path / "broken template.gguf", chat_template="{% for m in messages %}{{ m.content }")
    backend = GgufBackend.load(Load(request_id=1, model_path=str(model), context_length=256),
                               DeviceChoice("cpu", "test"))
    try:
        events = list(backend.generate(Generate(request_id=2, messages=(ChatMessage("user", "Hi"),),
                                                settings=GenerationSettings(max_tokens=4, temperature=0.0)),
                                       GenerationControl()))
    finally:
        backend.close()
    done = events[-1]
    assert done.stats.chat_format == "chatml"
    assert "has an error on its line 1" in done.stats.template_note


def test_dict_is_transformers_restricted_one() -> None:
    """Jinja's `dict` global is the type: dict.update(messages[0], …) changed the conversation."""
    assert render("{{ dict(a=1) }}|{{ dict.fromkeys(['a', 'b'], 0) }}", {}) == "{'a': 1}|{'a': 0, 'b': 0}"
    with pytest.raises(UndefinedError):
        render("{{ dict.update(messages[0], {'role': 'system'}) }}", VARIABLES)
    assert VARIABLES["messages"][0]["role"] == "user"


@pytest.mark.parametrize("template", [
    "{% set ns = namespace(_hidden=1) %}",
    "{% set ns = namespace() %}{% set ns._hidden = 1 %}",
    "{% set ns = namespace() %}{% set ns._Namespace__attrs = {} %}",
])
def test_a_namespace_refuses_underscore_names_as_transformers_does(template: str) -> None:
    with pytest.raises(SecurityError, match="underscore"):
        render(template, {})


def test_a_namespace_keeps_ordinary_names() -> None:
    template = "{% set ns = namespace(total=1, self=2) %}{% set ns.total = ns.total + 1 %}{{ ns.total }},{{ ns.self }}"
    assert render(template, {}) == "2,2"


def test_a_template_that_ran_out_of_time_is_refused_at_once_the_next_time() -> None:
    # A load probes the template and the first answer renders it again: a hostile one
    # must cost its time limit once, not twice (the campaign's "nested loops" took 5.1 s).
    slow = "{% for i in range(100000) %}{% for j in range(100000) %}{{ '' }}{% endfor %}{% endfor %}{# once #}"
    started = time.monotonic()
    with pytest.raises(TemplateLimit, match="still running after 0.2 s"):
        render(slow, {}, seconds=0.2)
    first = time.monotonic() - started
    started = time.monotonic()
    with pytest.raises(TemplateLimit, match="still running after 0.2 s"):
        render(slow, {}, seconds=0.2)
    again = time.monotonic() - started
    assert first >= 0.2 and again < 0.05, (first, again)
    assert render("{{ 'fine' }}", {}) == "fine", "other templates still render"


def test_a_long_chat_gets_time_by_its_length_and_does_not_mark_the_template() -> None:
    """Issue 35: 100,000 one-letter messages outlasted the two seconds, and the model's own
    template was then refused for every later chat, which fell back to a built-in format."""
    template = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    chat = [{"role": "user", "content": "a"}] * 20_000
    assert render(template, {"messages": chat}, seconds=0.05).count("<|im_start|>") == 20_000
    slow = "{% for m in messages %}{% for i in range(100000) %}{% endfor %}{% endfor %}done {# slow per message #}"
    with pytest.raises(TemplateLimit, match="still running after"):
        render(slow, {"messages": chat[:100]}, seconds=0.05)
    assert render(slow, {"messages": []}, seconds=0.05).strip() == "done", "a long chat's timeout is not remembered"


def test_a_cancel_stops_the_template() -> None:
    asked = []

    def cancelled() -> bool:
        asked.append(1)
        return len(asked) > 1000

    template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    with pytest.raises(PromptCancelled):
        render(template, {"messages": [{"content": "a"}] * 100_000}, cancelled=cancelled)
    with pytest.raises(PromptCancelled):  # through build_prompt, which falls back on any other failure
        build_prompt(CONVERSATION, template=template, architecture="qwen2", tokens=ModelTokens(),
                     cancelled=lambda: True)
