"""`chat` loads and answers with the model's own settings (`models set`); its flags win over them."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_chat_cli import assert_no_traceback, json_lines, kestrel


def _add(model: Path) -> str:
    added = kestrel("models", "add", str(model))
    assert added.returncode == 0, added.stderr
    return added.stdout.strip()


def _set(model_id: str, *pairs: str) -> None:
    result = kestrel("models", "set", model_id, *pairs)
    assert result.returncode == 0, result.stderr


def _done(*args: str) -> dict:
    result = kestrel("chat", "--json", *args, "Hello")
    assert result.returncode == 0, result.stderr
    assert_no_traceback(result)
    return json_lines(result.stdout)[-1]


def test_the_models_sampling_and_system_prompt_apply_and_flags_win(tiny_model: Path) -> None:
    model_id = _add(tiny_model)
    _set(model_id, "max_tokens=5", "temperature=0", "context_length=512",
         "system_prompt=You are a terse assistant who answers in one word.")

    own = _done()
    by_id = _done("--model", model_id)
    flags = _done("--max-tokens", "7", "--system", "")

    assert own["tokens"] == 5 and own["finish_reason"] == "length"
    assert by_id["tokens"] == 5 and by_id["prompt_tokens"] == own["prompt_tokens"]
    assert flags["tokens"] == 7, "--max-tokens wins over the model's max_tokens"
    assert flags["prompt_tokens"] < own["prompt_tokens"], "--system '' replaces the model's system prompt"


def test_the_models_chat_template_reaches_the_load(tiny_model: Path, tmp_path: Path) -> None:
    model_id = _add(tiny_model)
    broken = tmp_path / "broken template.jinja"
    broken.write_text("{% for m in messages %}{{ m['content'] }", encoding="utf-8")
    _set(model_id, f"chat_template=@{broken}")

    result = kestrel("chat", "--json", "--max-tokens", "4", "Hello")

    assert result.returncode == 3, result.stderr
    assert "The chat template set in this model's settings cannot be used" in result.stderr
    assert "clear it" in result.stderr
    assert_no_traceback(result)


def test_the_models_device_applies_unless_device_is_given(tiny_model: Path) -> None:
    model_id = _add(tiny_model)
    _set(model_id, "device_preference=npu")

    refused = kestrel("chat", "--json", "--max-tokens", "4", "Hello")
    chosen = _done("--device", "cpu", "--max-tokens", "4")

    assert refused.returncode == 6 and "NPU" in refused.stderr, refused.stderr
    assert chosen["device"] == "CPU"


def _text(*args: str) -> str:
    result = kestrel("chat", "--json", "--max-tokens", "24", "--ctx", "512", "--seed", "11", *args, "Hello")
    assert result.returncode == 0, result.stderr
    return "".join(line.get("text", "") for line in json_lines(result.stdout) if line["type"] == "delta")


def test_min_p_from_the_flag_and_from_models_set_reaches_the_answer(tiny_model: Path) -> None:
    """min-p 1 keeps only the likeliest token, so a hot answer is the greedy one; dropped, it is not."""
    model_id = _add(tiny_model)
    greedy = _text("--temperature", "0")
    assert _text("--temperature", "2") != greedy, "the control: hot sampling wanders from greedy"
    assert _text("--temperature", "2", "--min-p", "1") == greedy

    _set(model_id, "min_p=1")
    assert _text("--temperature", "2") == greedy, "the model's own min_p"
    assert _text("--temperature", "2", "--min-p", "0") != greedy, "the flag wins over the model's"


def test_a_min_p_out_of_range_is_refused_in_words(tiny_model: Path) -> None:
    model_id = _add(tiny_model)
    flag = kestrel("chat", "--min-p", "2", "Hello")
    typed = kestrel("chat", "--min-p", "lots", "Hello")
    models_set = kestrel("models", "set", model_id, "min_p=1.5")

    assert flag.returncode == 2 and "--min-p 2 is not allowed: it must be a number from 0 to 1." in flag.stderr
    assert typed.returncode == 2 and 'it must be a number from 0 to 1 (0 is off) (you gave "lots")' in typed.stderr
    assert models_set.returncode != 0
    assert 'min_p must be a number from 0 to 1 (0 is off) (you gave "1.5")' in models_set.stderr
    for result in (flag, typed, models_set):
        assert_no_traceback(result)
