"""Tool use in the window: the approval bar, the calls in an answer, the Tools page and a chat's tool servers.

The service's events are emitted on the service's bus (as the tool loop emits them),
so these tests drive the real widgets without a model that calls tools.
"""

from __future__ import annotations

import dataclasses
import json

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from app.core.conversation import (Message, MessageState, Role, TextPart, ToolCallPart, ToolResultPart,
                                   joined_text)
from app.core.settings import Settings
from app.service import events as ev
from app.tools.choices import ToolChoices, choices_file, write_choices
from app.tools.mcp_config import McpServerConfig, read_mcp_config, write_mcp_config
from app.tools.values import ServerState, ServerStatus, ToolInfo
from app.ui.chat.conversation_delegate import markers
from app.ui.settings.dialogs import ConversationSettingsDialog, SettingsDialog
from app.ui.settings.mcp_json_dialog import check_mcp_text
from app.tools.result_cut import CutReason, cut_result
from app.ui.messages.tool_parts import call_from_href, call_header, parts_html, pretty_arguments
from tests.helpers.scripted_engine import ScriptedEngine
from tests.ui.conftest import idle, run, service_of, until
from tests.ui.test_server_settings import clipped

ARGS = json.dumps({"timezone": "Europe/Paris", "note": "x" * 1000})


def _chat(window, loop, text: str = "Hi") -> int:
    """Send a message (the scripted engine answers at once); the new chat's id."""
    window.composer.edit.setPlainText(text)
    window.composer.sendRequested.emit(text)
    run(loop, until(lambda: idle(window)() and window.doors.chat.conversation is not None
                    and len(window.adapter.messages.messages()) == 2, what="the answer"))
    assert window.doors.chat.conversation is not None
    return window.doors.chat.conversation.id


def _row_markers(window, conversation_id: int) -> tuple[str, ...]:
    model = window.adapter.conversations
    return markers(model.index(model.row_of(conversation_id)))


def test_the_approval_bar_asks_in_its_own_chat_and_its_buttons_answer(make_window, loop, qtbot, monkeypatch) -> None:
    window = make_window(engine=ScriptedEngine())
    first = _chat(window, loop, "first")
    window.new_conversation()
    second = _chat(window, loop, "second")
    assert first != second and window.doors.chat.conversation.id == second
    decided: list[tuple[int, str]] = []
    monkeypatch.setattr(window.doors.tools, "answer", lambda approval_id, decision: decided.append(
        (approval_id, str(decision))))
    bar = window.chat.approval
    bus = service_of(window).bus

    # A call of the chat that is not open: its row says so, the bar waits for that chat.
    bus.emit(ev.ToolApprovalAsked(7, first, 1, "time", "get_current_time", ARGS))
    assert bar.isHidden()
    assert "approve" in _row_markers(window, first) and "approve" not in _row_markers(window, second)
    window.open_chat(first)
    run(loop, until(lambda: window.doors.chat.conversation.id == first, what="the first chat"))
    assert bar.isVisible() and bar.approval_id == 7
    assert "get_current_time" in bar.title.text() and "time" in bar.title.text()
    shown = bar.arguments.toPlainText()
    assert '"timezone": "Europe/Paris"' in shown and "(1,000 characters)" in shown and "x" * 1000 not in shown
    assert "x" * 1000 in bar.full_text() and "x" * 1000 in bar.arguments.toolTip()
    bar.copy_button.click()
    assert json.loads(QGuiApplication.clipboard().text()) == json.loads(ARGS)
    assert all(b.accessibleName() or b.text() for b in (bar.allow_button, bar.always_button, bar.deny_button))
    assert bar.accessibleName() and bar.arguments.accessibleName()
    assert not clipped(bar), clipped(bar)
    # Keyboard users reach it between the messages and the composer, in reading order.
    chain, widget = [], window.messages
    for _ in range(8):
        widget = widget.nextInFocusChain()
        chain.append(widget)
    assert chain.index(bar.arguments) < chain.index(bar.allow_button) < chain.index(bar.always_button) \
        < chain.index(bar.deny_button) < chain.index(window.composer.edit)

    # Esc is not Deny: it does nothing here.
    bar.allow_button.setFocus()
    qtbot.keyClick(bar.allow_button, Qt.Key.Key_Escape)
    qtbot.keyClick(bar.arguments, Qt.Key.Key_Escape)
    assert bar.isVisible() and decided == []

    bar.allow_button.click()
    assert decided == [(7, "once")] and not bar.allow_button.isEnabled()
    bus.emit(ev.ToolApprovalSettled(7))
    assert bar.isHidden() and "approve" not in _row_markers(window, first)

    bus.emit(ev.ToolApprovalAsked(8, first, 1, "time", "convert_time", "{}"))
    assert bar.isVisible() and bar.allow_button.isEnabled()
    qtbot.keyClick(bar.always_button, Qt.Key.Key_Space)
    bus.emit(ev.ToolApprovalSettled(8))
    bus.emit(ev.ToolApprovalAsked(9, first, 1, "time", "convert_time", "not json"))
    assert bar.arguments.toPlainText() == "not json"
    bar.deny_button.click()
    bus.emit(ev.ToolApprovalSettled(9))
    assert decided == [(7, "once"), (8, "always"), (9, "deny")] and bar.isHidden()


def _answer(message_id: int, parts: tuple, state: MessageState = MessageState.COMPLETE) -> Message:
    return Message(id=message_id, conversation_id=1, role=Role.ASSISTANT, text=joined_text(parts), created=0.0, stats=None,
                   state=state, parts=parts)


CALL = ToolCallPart("c1", "time", "get_current_time", '{"timezone": "UTC"}')


def test_parts_show_in_order_with_calling_called_denied_and_error(qtbot) -> None:
    calling = parts_html((TextPart("Let me check."), CALL), dark=False, streaming=True)
    assert calling.index("Let me check.") < calling.index("Calling get_current_time…")
    assert "&quot;timezone&quot;: &quot;UTC&quot;" in calling
    done = parts_html((CALL, ToolResultPart("c1", "14:05"), TextPart("It is 14:05.")), dark=True)
    assert "Called get_current_time" in done and "14:05" in done and "Calling" not in done
    assert done.index("Called get_current_time") < done.index("It is 14:05.")
    denied = parts_html((CALL, ToolResultPart("c1", "refused", denied=True)), dark=False)
    assert "Denied by you" in denied and "refused" not in denied
    failed = parts_html((CALL, ToolResultPart("c1", "boom", is_error=True)), dark=False)
    assert "#b3261e" in failed and "boom" in failed
    long = "\n".join(f"line {n}" for n in range(50))
    cut = parts_html((CALL, ToolResultPart("c1", long)), dark=False)
    assert "line 5" in cut and "line 6\n" not in cut and "Show all (50 lines" in cut
    assert call_from_href("kestrel-tool:show:c1") == ("c1", True)
    whole = parts_html((CALL, ToolResultPart("c1", long)), dark=False, expanded={"c1"})
    assert "line 49" in whole and "Show less" in whole
    assert call_from_href("https://example.com") is None and call_from_href("kestrel-tool:open:c1") is None


def test_the_streaming_answer_shows_its_calls_then_the_final_parts_and_copies_them(
        make_window, loop, qtbot) -> None:
    window = make_window(engine=ScriptedEngine())
    conversation = _chat(window, loop)
    view, model, bus = window.messages, window.adapter.messages, service_of(window).bus
    streaming = Message(id=9001, conversation_id=conversation, role=Role.ASSISTANT, text="", created=0.0,
                        state=MessageState.STREAMING, stats=None)
    bus.emit(ev.MessageAdded(streaming))
    bus.emit(ev.TextGrew(conversation, 9001, "Let me check."))
    window.adapter.bridge.flush()
    bus.emit(ev.ToolPartsChanged(conversation, 9001, (TextPart("Let me check."), CALL)))
    index = model.index(model.row_of(9001))
    text = lambda: "\n".join(d.toPlainText() for d in view.delegate.body_of(index).documents)  # noqa: E731
    assert "Calling get_current_time…" in text() and text().count("Let me check.") == 1
    bus.emit(ev.ToolPartsChanged(conversation, 9001, (TextPart("Let me check."), CALL, ToolResultPart("c1", "14:05"))))
    bus.emit(ev.TextGrew(conversation, 9001, "It is 14:05."))
    window.adapter.bridge.flush()
    shown = text()
    assert "Called get_current_time" in shown and shown.index("14:05") < shown.index("It is 14:05.")
    assert shown.count("Let me check.") == 1
    final = dataclasses.replace(_answer(9001, (TextPart("Let me check."), CALL, ToolResultPart("c1", "14:05"),
                                               TextPart("It is 14:05."))), conversation_id=conversation)
    bus.emit(ev.AnswerFinished(final))
    shown = text()
    assert "Called get_current_time" in shown and "It is 14:05." in shown and "Calling" not in shown
    view.setCurrentIndex(index)
    view.copy_current()
    copied = QGuiApplication.clipboard().text()
    assert "get_current_time" in copied and "It is 14:05." in copied and "Let me check." in copied

    long = "\n".join(f"line {n}" for n in range(40))
    bus.emit(ev.AnswerFinished(dataclasses.replace(final, parts=(CALL, ToolResultPart("c1", long)))))
    before = view.visualRect(index).height()
    assert "line 39" not in text()
    assert view.open_link("kestrel-tool:show:c1")  # the result's "Show all" link
    run(loop, until(lambda: view.visualRect(index).height() > before, what="the whole result"))
    assert "line 39" in text() and "Show less" in text()
    assert "get_current_time" in index.data(Qt.ItemDataRole.AccessibleTextRole)


def _tools_use(window, loop, servers, choices=ToolChoices()):
    """mcp.json and the tool choices in the window's home, read by its ToolUse."""
    tools, mcp_file = service_of(window).tools, window.paths.mcp_file
    write_mcp_config(mcp_file, servers)
    write_choices(choices_file(mcp_file), choices)
    run(loop, tools.reload())
    return tools, mcp_file


def test_the_tools_tab_round_trips_servers_tools_and_approvals(make_window, loop, qtbot, monkeypatch) -> None:
    window = make_window(engine=ScriptedEngine(), start=True)
    time_server = McpServerConfig("time", command="python", args=("-m", "mcp_server_time"))
    files = McpServerConfig("files", url="http://127.0.0.1:9/mcp", enabled=False)
    tools, mcp_file = _tools_use(window, loop, [time_server, files],
                                 ToolChoices(always_allowed=frozenset({("time", "get_current_time")})))
    checked: list[bool] = []

    def use(dialog: SettingsDialog) -> int:
        """What the user does on the Tools tab before pressing OK."""
        qtbot.addWidget(dialog)
        dialog.resize(760, 640)
        dialog.show()
        _use_the_tools_tab(window, dialog, qtbot)
        checked.append(True)
        return 1

    monkeypatch.setattr(SettingsDialog, "exec", use)
    window.edit_settings("tools")
    assert checked
    run(loop, until(lambda: tools.choices.disabled_tools == {("time", "convert_time")}
                    and len(read_mcp_config(mcp_file)[0]) == 3 and window.doors.settings.settings.tool_rounds == 3,
                    what="the saved tools"))
    assert window.doors.settings.settings.tool_result_chars == 20_000
    servers, problems = read_mcp_config(mcp_file)
    assert problems == [] and [s.name for s in servers] == ["time", "files", "echo"]
    assert servers[1].enabled and servers[2].command == "node" and servers[2].args == ("/opt/my server/index.js",
                                                                                       "--flag")
    assert tools.choices.always_allowed == frozenset()


def _use_the_tools_tab(window, dialog: SettingsDialog, qtbot) -> None:
    assert dialog.tabs.currentWidget() is dialog.tools
    page = dialog.tools
    tree = page.tree
    assert [tree.topLevelItem(n).text(0) for n in range(tree.topLevelItemCount())] == ["time", "files"]
    assert tree.topLevelItem(1).text(1) == "turned off"
    assert tree.topLevelItem(1).checkState(0) == Qt.CheckState.Unchecked

    # The pool reports: the time server is ready with its tools, the other failed with its stderr.
    tool = lambda name: ToolInfo("time", name, name, f"{name} tool", {"type": "object"})  # noqa: E731
    service_of(window).bus.emit(ev.ToolServersChanged((
        ServerStatus("time", ServerState.READY, "", (), (tool("get_current_time"), tool("convert_time"))),
        ServerStatus("files", ServerState.FAILED, "It exited at once (code 1).", ("Traceback", "ImportError: x"),
                     ()))))
    assert tree.topLevelItem(0).text(1) == "ready" and tree.topLevelItem(0).childCount() == 2
    tree.setCurrentItem(tree.topLevelItem(1))
    assert "It exited at once" in page.details.text()
    assert page.stderr_toggle.isVisible() and not page.stderr.isVisible()
    page.stderr_toggle.click()
    assert page.stderr.isVisible() and "ImportError: x" in page.stderr.toPlainText()
    assert not clipped(page), clipped(page)

    tree.topLevelItem(0).child(1).setCheckState(0, Qt.CheckState.Unchecked)  # convert_time off
    tree.topLevelItem(1).setCheckState(0, Qt.CheckState.Checked)  # files on
    page.revoke_buttons[("time", "get_current_time")].click()
    assert page.findChild(type(page.details), "noneAllowed") is not None
    page.name.setText("time")
    page.where.setText("uvx other")
    page.add_button.click()
    assert "already a server named" in page.add_note.text()
    page.name.setText("echo")
    page.where.setText('node "/opt/my server/index.js" --flag')
    page.add_button.click()
    assert page.add_note.isHidden() and tree.topLevelItemCount() == 3
    page.rounds.setValue(3)
    page.result_chars.setValue(20_000)


def test_mcp_json_is_checked_before_it_is_saved(make_window, loop, qtbot, monkeypatch) -> None:
    servers, problems = check_mcp_text('{"mcpServers": {"t": {"command": "x"}}')
    assert servers == [] and problems and "mcp.json is not valid JSON" in problems[0] and "/tmp" not in problems[0]
    assert [s.name for s in check_mcp_text('{"mcpServers": {"t": {"command": "x"}}}')[0]] == ["t"]

    from app.ui.settings.mcp_json_dialog import McpJsonDialog

    window = make_window(engine=ScriptedEngine())
    texts = iter(['{"mcpServers": {"bad": ', '{"mcpServers": {"clock": {"command": "python", "args": ["-m", "x"]}}}'])

    def edit(editor: McpJsonDialog) -> int:
        editor.edit.setPlainText(next(texts))
        editor._save()
        assert not editor.problems.isHidden() and "Not saved" in editor.problems.text() and not editor.result()
        editor.edit.setPlainText(next(texts))
        editor._save()
        return editor.result()

    monkeypatch.setattr(McpJsonDialog, "exec", edit)
    dialog = SettingsDialog(window.doors.settings.settings, window, adapter=window.adapter,
                            model=window.doors.model, tools=window.doors.tools, mcp_file=window.paths.mcp_file)
    qtbot.addWidget(dialog)
    dialog.edit_mcp_json()
    run(loop, until(lambda: dialog.tools.tree.topLevelItemCount() == 1, what="the edited file read back"))
    assert dialog.tools.tree.topLevelItem(0).text(0) == "clock"
    assert [s.name for s in service_of(window).tools.servers()] == ["clock"]


def test_a_chats_settings_choose_its_tool_servers(qtbot) -> None:
    from app.core.generation import GenerationSettings

    dialog = ConversationSettingsDialog("", GenerationSettings(tools=("gone",)), None, servers=["time", "files"])
    qtbot.addWidget(dialog)
    checklist = dialog.form.tools
    assert [checklist.item(n).text() for n in range(checklist.count())] == ["time", "files", "gone (not in mcp.json)"]
    checklist.item(0).setCheckState(Qt.CheckState.Checked)
    assert dialog.values()[1].tools == ("time", "gone")
    empty = SettingsDialog(Settings(), None)
    qtbot.addWidget(empty)
    assert empty.form.tools.count() == 0 and empty.value().generation.tools == ()
    assert pretty_arguments("") == "{}"


def test_the_chat_settings_dialog_offers_the_servers_of_mcp_json(make_window, loop, monkeypatch) -> None:
    window = make_window(engine=ScriptedEngine())
    _chat(window, loop)
    _tools_use(window, loop, [McpServerConfig("clock", command="python"), McpServerConfig("files", url="http://x")])

    def choose(dialog: ConversationSettingsDialog) -> int:
        names = [dialog.form.tools.item(n).text() for n in range(dialog.form.tools.count())]
        assert names == ["clock", "files"]
        dialog.form.tools.item(1).setCheckState(Qt.CheckState.Checked)
        return 1

    monkeypatch.setattr(ConversationSettingsDialog, "exec", choose)
    window.edit_chat_settings()
    run(loop, until(lambda: window.doors.chat.conversation_settings()[1].tools == ("files",), what="the chat's tools"))


def test_a_result_kestrel_cut_says_so_in_its_block_header() -> None:
    # Issue 35, item 12: the note that the result was cut ends the text, out of sight until "Show all".
    call = ToolCallPart("c1", "files", "read_file", "{}")
    whole = ToolResultPart("c1", "x" * 500)
    cut = ToolResultPart("c1", cut_result("x" * 200_000, 847, CutReason.CONTEXT))
    assert call_header(call, whole, streaming=False) == "Called read_file"
    assert call_header(call, cut, streaming=False) == "Called read_file (result cut to 847 of 200,000 characters)"
    assert "result cut to 847 of 200,000 characters" in parts_html([call, cut], dark=False)
