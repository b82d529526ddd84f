"""The tool-use scenes of scripts/screenshot.py: the approval bar, an answer that called tools, Settings → Tools.

    KESTREL_HOME=/tmp/shots QT_SCALE_FACTOR=2 QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 2600x1700x24" \
      python scripts/screenshot.py --show tools-set --theme dark --out /tmp/shots/png

The Tools page shows real MCP servers: mcp-server-time (PyPI, run by this Python) started
for real, and one whose command fails at once, with its stderr. The approval bar is the
window's answer to the ToolApprovalAsked event the tool loop emits (emitted here, so the
scene needs no model that calls tools).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

TOOL_VIEWS = ("tool-parts", "tool-approval", "tools-settings")
TOOL_CHAT = "What time is it in Tokyo?"
_NOW = {"timezone": "Asia/Tokyo", "datetime": "2026-12-01T23:05:12+09:00", "day_of_week": "Tuesday",
        "is_dst": False}
_NOTE = "# To do\n\n" + "\n".join(f"- item {n}: call the plumber about the kitchen tap" for n in range(1, 40))


def seed_tool_chat(history_db: Path) -> None:
    """A chat whose answer called two tools, one of which failed (once per KESTREL_HOME)."""
    from app.core.answer_stats import AnswerStats, FinishReason
    from app.core.conversation import Role, TextPart, ToolCallPart, ToolResultPart, joined_text
    from app.core.store.history import HistoryStore

    store = HistoryStore(history_db)
    try:
        if any(c.title == TOOL_CHAT for c in store.list_conversations()):
            return
        chat = store.create_conversation(TOOL_CHAT)
        store.add_message(chat.id, Role.USER, "What time is it in Tokyo, and what is that in Lisbon?")
        parts = (TextPart("Let me look up the time there."),
                 ToolCallPart("c1", "time", "get_current_time", json.dumps({"timezone": "Asia/Tokyo"})),
                 ToolResultPart("c1", json.dumps(_NOW, indent=2)),
                 ToolCallPart("c2", "time", "convert_time", json.dumps(
                     {"source_timezone": "Asia/Tokyo", "time": "23:05", "target_timezone": "Europe/Lisboa"})),
                 ToolResultPart("c2", "Error executing tool convert_time: Invalid timezone: 'Europe/Lisboa'",
                                is_error=True),
                 TextPart("It is **23:05 on Tuesday** in Tokyo (JST, UTC+9). The conversion to Lisbon failed "
                          "(I misspelled the zone); Lisbon is 9 hours behind, so it is **14:05** there."))
        stats = AnswerStats(ttft_ms=120.0, tokens_per_s=41.0, tokens=88, device="CPU", finish_reason=FinishReason.STOP)
        store.add_message(chat.id, Role.ASSISTANT, joined_text(parts), stats=stats, parts=parts)
    finally:
        store.close()


def _write_servers(mcp_file: Path) -> None:
    from app.tools.choices import ToolChoices, choices_file, write_choices
    from app.tools.mcp_config import McpServerConfig, write_mcp_config

    broken = ("import sys; print('Starting notes server…', file=sys.stderr); "
              "print(\"ModuleNotFoundError: No module named 'notes_mcp'\", file=sys.stderr); sys.exit(1)")
    write_mcp_config(mcp_file, [
        McpServerConfig("time", command=sys.executable, args=("-m", "mcp_server_time", "--local-timezone", "UTC")),
        McpServerConfig("notes", command=sys.executable, args=("-c", broken)),
        McpServerConfig("files", command="npx", args=("-y", "@modelcontextprotocol/server-filesystem", "/home/me"),
                        enabled=False)])
    write_choices(choices_file(mcp_file), ToolChoices(always_allowed=frozenset({("time", "get_current_time")})))


def _chat_id(window: Any, title: str) -> int:
    from app.ui.state.conversation_model import ConversationRoles

    model = window.adapter.conversations
    for row in range(model.rowCount()):
        if model.index(row).data() == title:
            return model.index(row).data(ConversationRoles.ID)
    raise SystemExit(f"no chat called {title!r}")


async def tool_view(window: Any, service: Any, view: str, dialogs: list) -> Any:
    """Bring the window to one tool scene (the tool loop's events sent on the service's bus); returns what to grab."""
    from app.service.events import ToolApprovalAsked, ToolApprovalSettled

    chat = _chat_id(window, TOOL_CHAT)
    await window.doors.chat.open_conversation(chat)
    await asyncio.sleep(0.3)
    if view == "tool-parts":
        window.messages.scrollToTop()
    elif view == "tool-approval":
        window.messages.scroll_to_end()
        service.bus.emit(ToolApprovalAsked(1, chat, window.adapter.messages.messages()[-1].id, "files",
                                           "write_file", json.dumps({"path": "/home/me/notes/todo.md",
                                                                     "content": _NOTE})))
        await asyncio.sleep(0.4)
        dialogs.append(lambda: service.bus.emit(ToolApprovalSettled(1)))
    elif view == "tools-settings":
        from app.ui.settings.dialogs import SettingsDialog

        _write_servers(window.paths.mcp_file)
        await service.tools.offered(["time", "notes"])  # starts them for real: one ready, one failed
        dialog = SettingsDialog(window.doors.settings.settings, window, adapter=window.adapter,
                                model=window.doors.model, tools=window.doors.tools, mcp_file=window.paths.mcp_file)
        window.adapter.toolServersChanged.connect(dialog.tools.set_statuses)
        dialog.tabs.setCurrentWidget(dialog.tools)
        dialog.resize(780, 720)
        dialog.show()
        tree = dialog.tools.tree
        tree.setCurrentItem(tree.topLevelItem(1))
        dialog.tools.stderr_toggle.setChecked(True)
        dialogs.append(dialog.close)
        await asyncio.sleep(0.5)
        return dialog
    await asyncio.sleep(0.4)
    return window


async def tool_set(window: Any, service: Any, folder: Path, theme: str) -> None:
    """Every view of TOOL_VIEWS, saved as folder/<view>-<theme>-<scale>x.png."""
    await service.start_up()
    scale = os.environ.get("QT_SCALE_FACTOR", "1")
    folder.mkdir(parents=True, exist_ok=True)
    for view in TOOL_VIEWS:
        undo: list = []
        shown = await tool_view(window, service, view, undo)
        shown.grab().save(str(folder / f"{view}-{theme}-{scale}x.png"))
        for step in undo:
            step()
    await service.tools.close()
