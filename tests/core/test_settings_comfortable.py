"""The comfortable reading speed setting: its default, its check and its round trip."""

from __future__ import annotations

import dataclasses

import pytest

from app.core.settings import Settings, SettingsFile


def test_the_default_is_ten_tokens_a_second_and_it_round_trips(tmp_path) -> None:
    assert Settings().comfortable_tokens_per_s == 10.0
    file = SettingsFile(tmp_path / "settings.json")
    file.save(dataclasses.replace(Settings(), comfortable_tokens_per_s=15.5))
    assert file.load().comfortable_tokens_per_s == 15.5 and file.last_problem is None


@pytest.mark.parametrize("bad", [0, 0.5, 1001, "fast", True, None])
def test_a_bad_value_is_refused_in_words_and_reset_alone(bad: object) -> None:
    with pytest.raises(ValueError, match="comfortable_tokens_per_s must be a number of tokens per second"):
        dataclasses.replace(Settings(), comfortable_tokens_per_s=bad).validated()  # type: ignore[arg-type]
    problems: list[str] = []
    loaded = Settings.from_dict({"comfortable_tokens_per_s": bad, "theme": "dark"}, problems)
    assert loaded.comfortable_tokens_per_s == 10.0 and loaded.theme == "dark" and problems == ["comfortable_tokens_per_s"]
