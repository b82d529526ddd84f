"""How the window holds up: a 2,000-message chat, scrolling it, streaming into it.

    QT_QPA_PLATFORM=offscreen python benchmarks/ui_stream.py [--json OUT] [--starter]

Measures, on the real widgets (offscreen unless a display is set):
- opening a 2,000-message conversation and painting it, and how many message
  documents that laid out;
- one scroll step, repainted (median and 95th percentile);
- one streaming frame: a growing Markdown answer set on the model and repainted;
- with --starter: tokens/s of the starter model streamed into the window against the
  same answer through EngineClient alone (the window's CPU cost on a small machine).
Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ANSWER = ("Here is a **plan**:\n\n1. Read the file\n2. Parse it\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
          "```python\nfor line in open(path):\n    total += int(line)\n```\n")


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def build(home: Path):
    os.environ["KESTREL_HOME"] = str(home)
    import qasync
    from PySide6.QtWidgets import QApplication

    from app.core.conversation import Role
    from app.core.paths import data_paths
    from app.ui.app import build_window

    app = QApplication.instance() or QApplication([])
    loop = qasync.QEventLoop(app, already_running=True)
    asyncio.set_event_loop(loop)
    window = build_window(data_paths())
    window.resize(1100, 760)
    window.show()
    store = window.session.store
    conversation = store.create_conversation("Long chat")
    with store.transaction():
        for i in range(1000):
            store.add_message(conversation.id, Role.USER, f"Question {i}: what about item {i}?")
            store.add_message(conversation.id, Role.ASSISTANT, f"Answer {i}\n\n" + ANSWER)
    return app, loop, window, conversation.id


def measure_window(app, window, conversation_id: int) -> dict:
    from app.core.conversation import Role

    session, view = window.session, window.messages
    started = time.perf_counter()
    session.open_conversation(conversation_id)
    app.processEvents()
    view.viewport().grab()
    opened = time.perf_counter() - started
    layouts = view.delegate.layouts
    bar = view.verticalScrollBar()
    scroll = []
    for step in range(60):
        started = time.perf_counter()
        bar.setValue(bar.maximum() - step * bar.pageStep() // 2)
        app.processEvents()
        view.viewport().grab()
        scroll.append(time.perf_counter() - started)
    message = session.store.add_message(conversation_id, Role.ASSISTANT, "")
    session.messages.append(message)
    view.scroll_to_end()
    frames = []
    text = ""
    for step in range(200):
        text += ANSWER[step % len(ANSWER)] * 20
        started = time.perf_counter()
        session.messages.set_text(message.id, text)
        app.processEvents()
        view.viewport().grab()
        frames.append(time.perf_counter() - started)
    return {
        "messages": session.messages.rowCount(),
        "open_and_paint_ms": ms(opened),
        "documents_laid_out_on_open": layouts,
        "scroll_step_ms_median": ms(statistics.median(scroll)),
        "scroll_step_ms_p95": ms(percentile(scroll, 0.95)),
        "stream_frame_ms_median": ms(statistics.median(frames)),
        "stream_frame_ms_p95": ms(percentile(frames, 0.95)),
        "stream_final_answer_chars": len(text),
    }


def measure_starter(loop, window) -> dict:
    """Tokens/s of the same greedy answer: into the window, and through the client alone."""
    import dataclasses

    from app.engine.protocol import ChatMessage, Done
    from app.service.client import EngineClient

    session = window.session

    async def in_window() -> dict:
        await session.start_up()
        session.new_conversation()
        conversation_id = session._ensure_conversation("Speed")
        prompt, settings = session.conversation_settings()
        settings = dataclasses.replace(settings, max_tokens=128, temperature=0.0, seed=1)
        session.set_conversation_settings(prompt, settings)
        session.open_conversation(conversation_id)
        session.send("Write a long story about a kestrel.")
        await session.task
        return session.messages.messages()[-1].stats, settings

    async def headless(settings) -> dict:
        client = EngineClient()
        try:
            await client.load(str(session.model.path), context_length=settings.context_length)
            async for event in client.generate([ChatMessage("user", "Write a long story about a kestrel.")],
                                               settings):
                if isinstance(event, Done):
                    return event.stats
        finally:
            await client.shutdown()

    def run(coro):
        task = loop.create_task(coro)
        from PySide6.QtTest import QTest

        while not task.done():
            QTest.qWait(5)
        return task.result()

    window_stats, settings = run(in_window())
    run(session.shutdown())
    headless_stats = run(headless(settings))
    return {"window_tokens_per_s": window_stats["tokens_per_s"],
            "headless_tokens_per_s": headless_stats["tokens_per_s"],
            "window_share": round(window_stats["tokens_per_s"] / headless_stats["tokens_per_s"], 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "ui_stream.json")
    parser.add_argument("--starter", action="store_true", help="also stream the starter model")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kestrel-ui-bench ") as home:
        app, loop, window, conversation_id = build(Path(home))
        result = measure_window(app, window, conversation_id)
        if args.starter:
            result.update(measure_starter(loop, window))
        window.session.store.close()
        loop.stop()
        asyncio.events._set_running_loop(None)
        loop.close()
    width = max(len(k) for k in result)
    for key, value in result.items():
        print(f"{key:<{width}}  {value}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2))
    print(f"\nwritten: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
