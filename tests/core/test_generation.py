"""Tests for GenerationSettings: defaults, dict round trip, validation messages."""

from __future__ import annotations

import dataclasses
import json

import pytest

from app.core.generation import GenerationSettings


def test_defaults() -> None:
    settings = GenerationSettings()
    assert settings.to_dict() == {
        "temperature": 0.7,
        "top_p": 0.95,
        "top_k": 40,
        "min_p": 0.0,
        "repeat_penalty": 1.1,
        "max_tokens": 512,
        "seed": -1,
        "context_length": 4096,
        "thinking": True,
        "tools": [],
    }
    assert settings.validated() == settings


def test_thinking_must_be_a_boolean() -> None:
    with pytest.raises(ValueError, match="thinking must be true or false"):
        GenerationSettings(thinking="no").validated()  # type: ignore[arg-type]


def test_round_trip_through_json() -> None:
    settings = GenerationSettings(temperature=0.2, top_k=0, max_tokens=64, seed=1234)
    loaded = GenerationSettings.from_dict(json.loads(json.dumps(settings.to_dict())))
    assert loaded == settings


def test_from_dict_ignores_unknown_keys_and_fills_missing_ones() -> None:
    loaded = GenerationSettings.from_dict({"temperature": 1.5, "mirostat": 2})
    assert loaded == GenerationSettings(temperature=1.5)


def test_settings_written_before_min_p_load_with_it_off() -> None:
    older = {"temperature": 0.4, "top_p": 0.9, "top_k": 20, "repeat_penalty": 1.05, "max_tokens": 64}
    loaded = GenerationSettings.from_dict(older).validated()
    assert loaded.min_p == 0.0 and loaded.temperature == 0.4
    assert GenerationSettings.from_dict({"min_p": 0.05}).validated().min_p == 0.05


def test_is_frozen_and_changed_with_replace() -> None:
    settings = GenerationSettings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.temperature = 1.0  # type: ignore[misc]
    warmer = dataclasses.replace(settings, temperature=1.0)
    assert (warmer.temperature, settings.temperature) == (1.0, 0.7)


def test_validated_normalises_whole_numbers_to_floats() -> None:
    settings = GenerationSettings(temperature=1, top_p=1, min_p=1, repeat_penalty=2).validated()
    assert isinstance(settings.temperature, float)
    assert isinstance(settings.min_p, float)
    assert isinstance(settings.top_p, float)
    assert isinstance(settings.repeat_penalty, float)
    assert settings.temperature == 1.0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("temperature", 0.0),
        ("temperature", 5.0),
        ("top_p", 1.0),
        ("top_p", 0.001),
        ("top_k", 0),
        ("min_p", 0.0),
        ("min_p", 1.0),
        ("repeat_penalty", 0.5),
        ("repeat_penalty", 3.0),
        ("max_tokens", 1),
        ("seed", 0),
        ("seed", 2**32 - 1),
        ("context_length", 256),
        ("context_length", 1_048_576),
    ],
)
def test_edges_of_each_range_are_allowed(field: str, value: float) -> None:
    settings = dataclasses.replace(GenerationSettings(), **{field: value}).validated()
    assert getattr(settings, field) == value


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("temperature", -0.1, "from 0 to 5"),
        ("temperature", 5.01, "from 0 to 5"),
        ("temperature", float("nan"), "from 0 to 5"),
        ("temperature", "hot", "from 0 to 5"),
        ("temperature", True, "from 0 to 5"),
        ("top_p", 0.0, "greater than 0 and at most 1"),
        ("top_p", 1.5, "greater than 0 and at most 1"),
        ("top_k", -1, "0 or more"),
        ("top_k", 2.5, "0 or more"),
        ("min_p", -0.01, "from 0 to 1"),
        ("min_p", 1.5, "from 0 to 1"),
        ("min_p", "some", "from 0 to 1"),
        ("repeat_penalty", 0.4, "from 0.5 to 3"),
        ("repeat_penalty", 3.5, "from 0.5 to 3"),
        ("max_tokens", 0, "1 or more"),
        ("seed", 1.5, "whole number"),
        ("seed", None, "whole number"),
        ("context_length", 255, "from 256 to 1,048,576"),
        ("context_length", 1_048_577, "from 256 to 1,048,576"),
    ],
)
def test_out_of_range_values_name_the_field_and_range(
    field: str, value: object, allowed: str
) -> None:
    settings = dataclasses.replace(GenerationSettings(), **{field: value})
    with pytest.raises(ValueError) as caught:
        settings.validated()
    message = str(caught.value)
    assert message.startswith(f"{field} must be")
    assert allowed in message
    assert repr(value) in message
