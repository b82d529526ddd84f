"""The names the model sees for tools: the tool's own unless two servers share it, always valid and unique."""

from __future__ import annotations

from app.tools.pool import ToolInfo, model_names


def test_a_name_two_servers_share_is_prefixed_with_each_server() -> None:
    tools = [("files", "read_file"), ("time", "get_current_time"), ("backup", "read_file")]
    assert model_names(tools) == ["files__read_file", "get_current_time", "backup__read_file"]


def test_names_are_made_safe_short_and_unique() -> None:
    names = model_names([("my server", "search.web"), ("a", "x" * 100), ("b", "search/web")])
    assert names[0] == "my_server__search_web" and names[2] == "b__search_web"
    assert len(names[1]) == 64
    clash = model_names([("a b", "t"), ("a_b", "t"), ("c", "t")])
    assert clash == ["a_b__t", "a_b__t_2", "c__t"]


def test_a_tool_is_offered_in_the_shape_chat_templates_take() -> None:
    tool = ToolInfo("time", "get_current_time", "get_current_time", "The time now.",
                    {"type": "object", "properties": {"timezone": {"type": "string"}}})
    assert tool.for_model() == {"type": "function", "function": {
        "name": "get_current_time", "description": "The time now.",
        "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}}}}
