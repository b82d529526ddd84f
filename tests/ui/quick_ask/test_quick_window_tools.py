"""A quick question whose answer calls a tool: the approval asks in the quick-ask window (the chat's bar), not
in the main window; Allow runs the real mcp-server-time and the answer finishes, Deny ends it with the chat's
words. On the scripted engine, which makes the tool call, with tools on for new chats in the defaults."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.core.conversation import Message, MessageState, Role, TextPart, ToolCallPart, ToolResultPart
from app.core.generation import GenerationSettings
from app.service.doors.quick_ask import QuickAskDoor
from app.tools.mcp_config import McpServerConfig, write_mcp_config
from app.ui.chat.tool_approval import ToolApprovalBar
from app.ui.quick_ask.quick_window import QuickAskWindow
from tests.helpers.scripted_answers import Script
from tests.helpers.scripted_engine import ScriptedEngine
from tests.helpers.tiny_gguf import build_tiny_gguf
from tests.helpers.tool_call_gguf import QWEN3_TEMPLATE
from tests.ui.conftest import run, service_of, until, with_generation

NOW = ("get_current_time", '{"timezone": "UTC"}')


@pytest.fixture
def quick_with_tools(make_window, loop, qtbot, tmp_path: Path):
    """A main window whose defaults offer the real time server's tools to new chats, with its own chat open
    (tools on there too), and a quick-ask window over its service; the scripted engine calls NOW, then ends."""
    qwen = build_tiny_gguf(tmp_path / "qwen.gguf", chat_template=QWEN3_TEMPLATE.read_text(encoding="utf-8"))
    engine = ScriptedEngine()
    engine.scripts.extend([Script(text=("Checking.",), calls=(NOW,), endless=False),
                           Script(text=("Done", "."), endless=False)])
    window = make_window(model=qwen, engine=engine, generation=GenerationSettings(
        max_tokens=24, temperature=0.0, context_length=1024, tools=("time",)))
    write_mcp_config(window.paths.mcp_file, [McpServerConfig(
        "time", command=sys.executable, args=("-m", "mcp_server_time", "--local-timezone", "UTC"))])
    run(loop, service_of(window).tools.reload())
    with_generation(window, loop, tools=("time",))  # the main window's open chat is a saved chat of its own
    quick = QuickAskWindow(QuickAskDoor(service_of(window)))
    qtbot.addWidget(quick)
    quick.summon()
    QTest.keyClicks(quick.question, "What time is it?")
    QTest.keyClick(quick.question, Qt.Key.Key_Return)
    run(loop, until(quick.approval.isVisible, what="the approval in the quick-ask window"))
    return window, quick


def _answer(quick: QuickAskWindow) -> Message:
    return [m for m in quick.answers.exchange.messages() if m.role == Role.ASSISTANT][-1]


def _shown(quick: QuickAskWindow) -> str:
    """The answer's text as the quick-ask window draws it."""
    model = quick.answers.exchange
    body = quick.answers.delegate.body_of(model.index(model.rowCount() - 1))
    return "\n".join(document.toPlainText() for document in body.documents)


def _finished(quick: QuickAskWindow) -> bool:
    return not quick._door.busy and _answer(quick).state != MessageState.STREAMING


def test_the_approval_asks_in_the_quick_window_and_allow_runs_the_tool(loop, quick_with_tools) -> None:
    window, quick = quick_with_tools
    bar = quick.approval
    assert isinstance(bar, ToolApprovalBar), "the chat's own bar"
    assert "get_current_time" in bar.title.text() and '"timezone": "UTC"' in bar.arguments.toPlainText()
    assert bar.allow_button.isVisible() and bar.deny_button.isVisible()
    assert quick.geometry().contains(bar.geometry().translated(quick.pos())), "inside the window, fitted"
    assert quick._door.busy and "Calling get_current_time…" in _shown(quick)
    assert _answer(quick).parts == () or not any(isinstance(p, ToolResultPart) for p in _answer(quick).parts), \
        "nothing ran before the person chose"
    # The main window's open chat is another chat: its bar does not ask.
    open_chat = window.doors.chat.conversation
    assert open_chat is not None and open_chat.id != quick._door.conversation_id
    assert window.chat.approval.isHidden() and window.chat.approval.approval_id is None

    bar.allow_button.click()
    run(loop, until(lambda: _finished(quick) and _answer(quick).text.endswith("Done."), what="the answer"))
    assert bar.isHidden()
    parts = _answer(quick).parts
    assert [type(p) for p in parts][:3] == [TextPart, ToolCallPart, ToolResultPart], parts
    result = parts[2]
    assert isinstance(result, ToolResultPart) and not result.is_error and '"timezone": "UTC"' in result.text
    assert "Called get_current_time" in _shown(quick) and "Done." in _shown(quick)
    assert not service_of(window).tools.choices.is_always_allowed("time", "get_current_time")
    assert window.chat.approval.isHidden()


def test_deny_ends_the_answer_with_the_chats_words(loop, quick_with_tools) -> None:
    _window, quick = quick_with_tools
    quick.approval.deny_button.click()
    run(loop, until(lambda: _finished(quick) and len(_answer(quick).parts) >= 3, what="the denied answer"))
    denied = _answer(quick).parts[2]
    assert isinstance(denied, ToolResultPart) and denied.denied
    assert "Denied by you" in _shown(quick)
    assert quick.approval.isHidden()


def test_new_takes_the_approval_away_and_esc_on_it_hides_the_window(loop, quick_with_tools) -> None:
    _window, quick = quick_with_tools
    QTest.keyClick(quick.approval.deny_button, Qt.Key.Key_Escape)
    assert not quick.isVisible(), "Esc hides the window from the bar too"
    quick.summon()
    assert quick.approval.isVisible(), "the call still waits, shown again"
    quick.new_button.click()
    assert quick.approval.isHidden(), "a new exchange has no call waiting"
    run(loop, until(lambda: not quick._door.busy, what="the old answer stopped"))
