"""Every value a command refuses is named with what it takes; a command's mistakes show its own usage."""

from __future__ import annotations

import pytest

from app.__main__ import main
from app.library.model_defaults import ALLOWED, field_names, parse_value

# A value each model setting refuses, as a user would type it.
REFUSED = {
    "context_length": "abc", "gpu_layers": "lots", "device_preference": "moon", "temperature": "hot",
    "top_p": "0", "top_k": "1.5", "min_p": "1.5", "repeat_penalty": "9", "max_tokens": "0", "seed": "q",
    "prompt_lookup": "maybe", "tools": ",".join(f"s{n}" for n in range(101)),
}
# Fields that take any text: nothing typed is refused.
ANY_TEXT = {"system_prompt", "chat_template"}


def test_every_model_setting_is_listed_here() -> None:
    assert set(field_names()) == set(REFUSED) | ANY_TEXT == set(ALLOWED)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_refused_model_setting_names_the_field_what_it_takes_and_what_was_given(name: str) -> None:
    given = REFUSED[name]
    with pytest.raises(ValueError) as refused:
        parse_value(name, given)
    shown = given if len(given) <= 60 else given[:59] + "…"
    assert str(refused.value) == f'{name} must be {ALLOWED[name]} (you gave "{shown}").'


def test_the_issue_s_example_in_its_words() -> None:
    with pytest.raises(ValueError, match=r'^temperature must be a number from 0 to 5 \(you gave "hot"\)\.$'):
        parse_value("temperature", "hot")


@pytest.mark.parametrize("flag, given, allowed", [
    ("--temperature", "hot", "a number from 0 to 5"),
    ("--min-p", "some", "a number from 0 to 1 (0 is off)"),
    ("--max-tokens", "many", "a whole number, 1 or more"),
    ("--ctx", "1e3", "a whole number of tokens from 256 to 1,048,576"),
    ("--seed", "lucky", "a whole number (-1 for a new random one each time)"),
    ("--threads", "x", "a whole number, 1 or more"),
])
def test_a_chat_option_that_is_not_a_number_says_what_it_takes(capsys, flag: str, given: str,
                                                               allowed: str) -> None:
    with pytest.raises(SystemExit) as ended:
        main(["chat", flag, given, "hi"])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert f'argument {flag}: it must be {allowed} (you gave "{given}")' in err
    assert err.startswith("usage: kestrel chat ")


@pytest.mark.parametrize("argv, usage", [
    (["chat", "--bogus", "hi"], "usage: kestrel chat "),
    (["models", "set", "x", "--bogus"], "usage: kestrel models set "),
    (["models", "list", "--bogus"], "usage: kestrel models list "),
    (["export", "--bogus"], "usage: kestrel export "),
    (["import", "f.json", "--bogus"], "usage: kestrel import "),
    (["doctor", "--bogus"], "usage: kestrel doctor "),
    (["serve", "--bogus"], "usage: kestrel serve "),
    (["tools", "list", "--bogus"], "usage: kestrel tools list "),
])
def test_an_unknown_option_shows_the_command_s_own_usage(capsys, argv: list[str], usage: str) -> None:
    with pytest.raises(SystemExit) as ended:
        main(argv)
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(usage), err
    assert "unrecognized arguments: --bogus" in err
    assert "usage: kestrel [-h]" not in err


def test_an_unknown_option_before_any_command_shows_the_top_level_usage(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--bogus"])
    assert capsys.readouterr().err.startswith("usage: kestrel [-h]")
