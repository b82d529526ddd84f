"""The quick-ask scene of scripts/screenshot.py with a tool call waiting for the person's approval.

    KESTREL_HOME=/tmp/shots QT_SCALE_FACTOR=2 QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 2600x1700x24" \
      python scripts/screenshot.py --show quick-ask-approval --theme dark --out /tmp/shots/quick-approval.png

Real parts: the default model (Qwen 2.5 calls tools; a model that answers without calling one ends
the scene with words saying so), offered the tools of mcp-server-time (PyPI, run by this Python) for
new chats in the defaults, asked in the quick-ask window; the grab is taken while the call waits.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from typing import Any

QUESTION = "What time is it in Tokyo right now? Use the get_current_time tool."


async def quick_ask_approval(window: Any, service: Any, shown: list, until: Any) -> None:
    """The quick-ask window with its answer's tool call asking to run; what to grab goes in `shown`."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtTest import QTest

    from app.service.doors.quick_ask import QuickAskDoor
    from app.tools.mcp_config import McpServerConfig, write_mcp_config
    from app.ui.quick_ask.quick_window import QuickAskWindow

    write_mcp_config(window.paths.mcp_file, [McpServerConfig(
        "time", command=sys.executable, args=("-m", "mcp_server_time", "--local-timezone", "UTC"))])
    await window.doors.start_up()
    await service.tools.reload()
    await until(lambda: window.doors.model.model_state.value == "ready")
    settings = window.doors.settings.settings
    await window.doors.settings.update_settings(dataclasses.replace(settings, generation=dataclasses.replace(
        settings.generation, max_tokens=160, temperature=0.0, tools=("time",))))
    QGuiApplication.clipboard().setText("")
    quick = QuickAskWindow(QuickAskDoor(service))
    quick.summon()
    QTest.keyClicks(quick.question, QUESTION)
    QTest.keyClick(quick.question, Qt.Key.Key_Return)
    await until(lambda: quick.approval.isVisible() or (quick.answers.last_answer() and not quick._door.busy))
    if not quick.approval.isVisible():
        raise SystemExit("The model answered without calling get_current_time: choose a model that calls tools "
                         "(Qwen 2.5 does) as the default, then run the scene again.")
    await asyncio.sleep(0.5)  # the window fitted around the bar, painted
    shown.append(quick)
