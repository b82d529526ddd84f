"""tool_choices.json: tools turned off and "always allow", kept per (server, tool)."""

from __future__ import annotations

from pathlib import Path

from app.tools.choices import ToolChoices, choices_file, read_choices, write_choices


def test_choices_are_made_taken_back_and_kept_on_disk(tmp_path: Path) -> None:
    path = choices_file(tmp_path / "mcp.json")
    assert path == tmp_path / "tool_choices.json"
    choices = ToolChoices().disabling("files", "write_file").allowing("time", "get_current_time")
    assert not choices.is_enabled("files", "write_file") and choices.is_enabled("files", "read_file")
    assert choices.is_always_allowed("time", "get_current_time")
    assert not choices.is_always_allowed("other", "get_current_time")
    write_choices(path, choices)
    assert read_choices(path) == (choices, [])
    back = choices.revoking("time", "get_current_time").enabling("files", "write_file")
    assert back == ToolChoices()
    assert choices.forgetting_server("files") == ToolChoices(always_allowed=choices.always_allowed)


def test_a_bad_file_gives_no_choices_so_every_tool_asks(tmp_path: Path) -> None:
    path = tmp_path / "tool_choices.json"
    assert read_choices(path) == (ToolChoices(), [])
    for text in ("{not json", "[]", '{"version": 99, "always_allow": [["a", "b"]]}'):
        path.write_text(text, encoding="utf-8")
        choices, problems = read_choices(path)
        assert choices == ToolChoices() and len(problems) == 1
    path.write_text('{"always_allow": [["a", "b"], ["c"], 5], "disabled": []}', encoding="utf-8")
    choices, problems = read_choices(path)
    assert choices == ToolChoices(always_allowed=frozenset({("a", "b")})) and len(problems) == 1
