"""A model's own defaults: what is written, what is read back, what is refused and why."""

from __future__ import annotations

import json

import pytest

from app.core.generation import GenerationSettings
from app.library.model_defaults import ModelDefaults, field_names, parse_value


def test_nothing_set_writes_nothing_and_leaves_the_app_settings() -> None:
    base = GenerationSettings(temperature=0.3, context_length=8192)
    assert ModelDefaults().to_dict() == {}
    assert ModelDefaults().generation(base) == base


def test_only_set_keys_are_written_and_they_round_trip_through_json() -> None:
    defaults = ModelDefaults(context_length=16384, gpu_layers=-1, device_preference="gpu",
                             system_prompt="Réponds en français.", temperature=0.2, seed=7,
                             chat_template="{{ messages }}")
    written = json.loads(json.dumps(defaults.to_dict(), ensure_ascii=False))
    assert set(written) == {"context_length", "gpu_layers", "device_preference", "system_prompt",
                            "temperature", "seed", "chat_template"}
    assert ModelDefaults.from_dict(written) == defaults


def test_the_models_values_go_over_the_apps_and_the_rest_stay() -> None:
    base = GenerationSettings(temperature=0.7, top_k=40, context_length=4096, thinking=False)
    mine = ModelDefaults(temperature=0.1, context_length=32768, gpu_layers=10).generation(base)
    assert (mine.temperature, mine.context_length, mine.top_k, mine.thinking) == (0.1, 32768, 40, False)


def test_a_bad_value_on_disk_is_dropped_with_its_reason_and_the_rest_kept() -> None:
    problems: list[str] = []
    read = ModelDefaults.from_dict({"temperature": "hot", "top_k": 20, "gpu_layers": -5,
                                    "device_preference": "tpu", "from_a_newer_kestrel": 1}, problems)
    assert read == ModelDefaults(top_k=20)
    assert len(problems) == 3
    assert any("temperature" in p for p in problems)
    assert any("gpu_layers" in p for p in problems)
    assert any("device_preference" in p for p in problems)


@pytest.mark.parametrize("data", [None, [], "x", 3])
def test_defaults_that_are_not_a_mapping_read_as_none_set(data: object) -> None:
    assert ModelDefaults.from_dict(data, []) == ModelDefaults()


@pytest.mark.parametrize(("defaults", "named"), [
    (ModelDefaults(context_length=100), "context_length"),
    (ModelDefaults(temperature=9.0), "temperature"),
    (ModelDefaults(top_p=0.0), "top_p"),
    (ModelDefaults(max_tokens=0), "max_tokens"),
    (ModelDefaults(gpu_layers=-2), "gpu_layers"),
    (ModelDefaults(gpu_layers=True), "gpu_layers"),
    (ModelDefaults(device_preference="tpu"), "device_preference"),
    (ModelDefaults(chat_template="  "), "chat_template"),
    (ModelDefaults(system_prompt=3), "system_prompt"),  # type: ignore[arg-type]
])
def test_validated_names_the_bad_field(defaults: ModelDefaults, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        defaults.validated()


def test_validated_makes_whole_numbers_floats_where_floats_are_wanted() -> None:
    checked = ModelDefaults(temperature=1, repeat_penalty=1).validated()
    assert isinstance(checked.temperature, float) and isinstance(checked.repeat_penalty, float)


def test_typed_values_are_parsed_as_each_field_wants() -> None:
    assert parse_value("context_length", "8192") == 8192
    assert parse_value("temperature", "0.5") == 0.5
    assert parse_value("gpu_layers", "auto") is None
    assert parse_value("gpu_layers", "-1") == -1
    assert parse_value("device_preference", "cpu") == "cpu"
    assert parse_value("device_preference", "") is None
    assert parse_value("system_prompt", "") == ""
    assert parse_value("system_prompt", " Be brief. ") == " Be brief. "


@pytest.mark.parametrize(("name", "text", "said"), [
    ("context_length", "lots", "context_length"),
    ("context_length", "10", "context_length"),
    ("temperature", "warm", "temperature"),
    ("colour", "blue", '"colour" is not a model setting'),
    ("device_preference", "tpu", "device_preference"),
])
def test_a_bad_typed_value_says_which_and_what_is_allowed(name: str, text: str, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        parse_value(name, text)


def test_the_field_names_are_the_dataclass_fields() -> None:
    assert field_names()[0] == "context_length"
    assert "chat_template" in field_names()


def test_a_models_own_tools_reach_new_chats_and_survive_model_json() -> None:
    from app.library.model_defaults import parse_value

    assert parse_value("tools", " time , files ") == ("time", "files")
    assert parse_value("tools", "-") == () and parse_value("tools", "") is None
    own = ModelDefaults(tools=("time",))
    assert own.generation(GenerationSettings()).tools == ("time",)
    assert ModelDefaults().generation(GenerationSettings(tools=("files",))).tools == ("files",)
    problems: list[str] = []
    again = ModelDefaults.from_dict(json.loads(json.dumps(own.to_dict())), problems)
    assert again == own and problems == []
    assert ModelDefaults.from_dict({"tools": "time"}, problems).tools is None and "tools" in problems[-1]


def test_a_models_own_min_p_reaches_new_chats_and_an_older_model_json_still_reads() -> None:
    own = ModelDefaults.from_dict(json.loads(json.dumps(ModelDefaults(min_p=0.05).to_dict())))
    assert own == ModelDefaults(min_p=0.05) and own.generation(GenerationSettings()).min_p == 0.05
    problems: list[str] = []
    older = ModelDefaults.from_dict({"temperature": 0.4, "top_k": 20}, problems)  # written before min_p
    assert older == ModelDefaults(temperature=0.4, top_k=20) and problems == []
    assert older.generation(GenerationSettings(min_p=0.1)).min_p == 0.1, "unset: the app's setting stands"
    assert ModelDefaults.from_dict({"min_p": 3}, problems).min_p is None
    assert problems == ["min_p must be a number from 0 to 1 (got 3)."]
    assert parse_value("min_p", "0.05") == 0.05 and parse_value("min_p", "") is None
    with pytest.raises(ValueError, match=r'min_p must be a number from 0 to 1 \(0 is off\) \(you gave "1.5"\)'):
        parse_value("min_p", "1.5")
