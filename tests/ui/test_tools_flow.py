"""Tool use end to end in the window: a scripted model that calls tools, the real mcp-server-time, and the
approval bar's buttons (allow once, always, deny) deciding what runs."""

from __future__ import annotations

import sys
from pathlib import Path

from app.core.conversation import Message, TextPart, ToolCallPart, ToolResultPart
from app.tools.mcp_config import McpServerConfig, write_mcp_config
from tests.helpers.scripted_answers import Script
from tests.helpers.scripted_engine import ScriptedEngine
from tests.helpers.tiny_gguf import build_tiny_gguf
from tests.helpers.tool_call_gguf import QWEN3_TEMPLATE
from tests.ui.conftest import idle, run, service_of, until, with_generation

NOW = ("get_current_time", '{"timezone": "UTC"}')
CONVERT = ("convert_time", '{"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}')


def _ask(window, loop, engine: ScriptedEngine, call: tuple[str, str], text: str) -> None:
    engine.scripts.extend([Script(text=("Checking.",), calls=(call,), endless=False),
                           Script(text=("Done", "."), endless=False)])
    window.composer.edit.setPlainText(text)
    window.composer.sendRequested.emit(text)


def _last(window) -> Message:
    return window.adapter.messages.messages()[-1]


def _shown(window) -> str:
    model = window.adapter.messages
    body = window.messages.delegate.body_of(model.index(model.rowCount() - 1))
    return "\n".join(document.toPlainText() for document in body.documents)


def test_allow_once_always_and_deny_through_the_bar(make_window, loop, tmp_path: Path) -> None:
    qwen = build_tiny_gguf(tmp_path / "qwen.gguf", chat_template=QWEN3_TEMPLATE.read_text(encoding="utf-8"))
    engine = ScriptedEngine()
    window = make_window(model=qwen, engine=engine)
    write_mcp_config(window.paths.mcp_file, [McpServerConfig(
        "time", command=sys.executable, args=("-m", "mcp_server_time", "--local-timezone", "UTC"))])
    tools, bar = service_of(window).tools, window.chat.approval
    run(loop, tools.reload())
    with_generation(window, loop, tools=("time",))

    _ask(window, loop, engine, NOW, "What time is it?")
    run(loop, until(bar.isVisible, what="the approval bar"))
    assert "get_current_time" in bar.title.text() and '"timezone": "UTC"' in bar.arguments.toPlainText()
    assert "Calling get_current_time…" in _shown(window) and _shown(window).count("Checking.") == 1
    bar.allow_button.click()
    run(loop, until(lambda: idle(window)() and not _last(window).state.value == "streaming", what="the answer"))
    assert bar.isHidden()
    parts = _last(window).parts
    assert [type(p) for p in parts][:3] == [TextPart, ToolCallPart, ToolResultPart], parts
    result = parts[2]
    assert isinstance(result, ToolResultPart) and not result.is_error and '"timezone": "UTC"' in result.text
    assert "Called get_current_time" in _shown(window) and "Done." in _shown(window)
    assert not tools.choices.is_always_allowed("time", "get_current_time")

    _ask(window, loop, engine, NOW, "And now?")
    run(loop, until(bar.isVisible, what="the second approval"))
    bar.always_button.click()
    run(loop, until(lambda: idle(window)() and len(_last(window).parts) >= 3, what="the second answer"))
    assert tools.choices.is_always_allowed("time", "get_current_time")

    _ask(window, loop, engine, NOW, "Once more?")  # always allowed: no bar, it runs
    run(loop, until(lambda: idle(window)() and len(_last(window).parts) >= 3 and
                    _last(window).text.endswith("Done."), what="the third answer"))
    assert bar.isHidden() and not _last(window).parts[2].denied

    _ask(window, loop, engine, CONVERT, "In Tokyo?")
    run(loop, until(bar.isVisible, what="the approval of another tool"))
    bar.deny_button.click()
    run(loop, until(lambda: idle(window)() and len(_last(window).parts) >= 3, what="the denied answer"))
    denied = _last(window).parts[2]
    assert isinstance(denied, ToolResultPart) and denied.denied
    assert "Denied by you" in _shown(window)
