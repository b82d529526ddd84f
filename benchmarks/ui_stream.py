"""How the window holds up: a 2,000-message chat, scrolling it, streaming into it.

    QT_QPA_PLATFORM=offscreen python benchmarks/ui_stream.py [--json OUT] [--starter]
                                                             [--root CHECKOUT] [--repeats N]

Measures, on the real widgets (offscreen unless a display is set):
- opening a 2,000-message conversation and painting it, and how many message
  documents that laid out;
- one scroll step, repainted (median and 95th percentile);
- one streaming frame: a growing Markdown answer set on the model and repainted;
- with --starter: tokens/s of the starter model streamed into the window against the
  same answer through EngineClient alone (the window's CPU cost on a small machine),
  `--repeats` times each, alternating, and the window process's CPU time while it
  streams (all its threads, as a share of one core).
--root picks the checkout whose app is imported, as in ui_watchdog.py (the drivers
there hide the window API before and after the redesign). Prints a table, writes JSON.
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

BENCHMARKS = Path(__file__).resolve().parent
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(BENCHMARKS))

from ui_watchdog import ANSWER, DEFAULT_ROOT, WindowDriver, build_any_window, pump_until, wait  # noqa: E402

PROMPT = "Write a long story about a kestrel."


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def build(home: Path):
    """A window over a history holding one 2,000-message chat (written before it opens)."""
    os.environ["KESTREL_HOME"] = str(home)
    import qasync
    from PySide6.QtWidgets import QApplication

    from app.core.conversation import Role
    from app.core.store.history import HistoryStore
    from app.core.paths import data_paths

    paths = data_paths().ensure()
    store = HistoryStore(paths.history_db)
    conversation = store.create_conversation("Long chat")
    with store.transaction():
        for i in range(1000):
            store.add_message(conversation.id, Role.USER, f"Question {i}: what about item {i}?")
            store.add_message(conversation.id, Role.ASSISTANT, f"Answer {i}\n\n" + ANSWER)
    store.close()
    app = QApplication.instance() or QApplication([])
    loop = qasync.QEventLoop(app, already_running=True)
    asyncio.set_event_loop(loop)
    window = build_any_window(paths)
    window.resize(1100, 760)
    window.show()
    return app, loop, window, conversation.id


def open_conversation(loop, driver: WindowDriver, conversation_id: int) -> None:
    window = driver.window
    if hasattr(window, "doors"):
        wait(loop, window.doors.chat.open_conversation(conversation_id))
    elif hasattr(window, "controller"):
        wait(loop, window.controller.open_conversation(conversation_id))
    else:
        window.session.open_conversation(conversation_id)


def streaming_message(driver: WindowDriver, conversation_id: int):
    """An empty STREAMING answer at the end of the open chat, and how to grow it."""
    from app.core.conversation import Message, MessageState, Role

    model = driver.messages
    message = Message(10**9, conversation_id, Role.ASSISTANT, "", time.time(), MessageState.STREAMING, None)
    model.append(message)
    if hasattr(model, "append_text"):
        return lambda more: model.append_text(message.id, more)
    text = [""]

    def grow(more: str) -> None:
        text[0] += more
        model.set_text(message.id, text[0])

    return grow


def measure_window(app, loop, driver: WindowDriver, conversation_id: int) -> dict:
    view = driver.window.messages
    started = time.perf_counter()
    open_conversation(loop, driver, conversation_id)
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
    grow = streaming_message(driver, conversation_id)
    view.scroll_to_end()
    app.processEvents()
    frames = []
    length = 0
    redraw = getattr(view, "redraw_growing", None)
    for step in range(200):
        more = ANSWER[step % len(ANSWER)] * 20
        length += len(more)
        started = time.perf_counter()
        grow(more)
        app.processEvents()
        if redraw is not None:
            redraw()  # The view draws a growing answer on its own clock; a frame is one such draw.
        view.viewport().grab()
        frames.append(time.perf_counter() - started)
    return {
        "messages": driver.message_count(),
        "open_and_paint_ms": ms(opened),
        "documents_laid_out_on_open": layouts,
        "scroll_step_ms_median": ms(statistics.median(scroll)),
        "scroll_step_ms_p95": ms(percentile(scroll, 0.95)),
        "stream_frame_ms_median": ms(statistics.median(frames)),
        "stream_frame_ms_p95": ms(percentile(frames, 0.95)),
        "stream_final_answer_chars": length,
    }


def measure_starter(loop, driver: WindowDriver, max_tokens: int, repeats: int) -> dict:
    """Tokens/s of the same greedy answer, into the window and through a client alone,
    alternating so that both meet the same machine."""
    import psutil

    from app.core.generation import GenerationSettings

    settings = GenerationSettings(max_tokens=max_tokens, temperature=0.0, seed=1, context_length=2048)
    process = psutil.Process()
    window_runs, headless_runs, cpu_shares = [], [], []
    for number in range(repeats):
        # Every other pair the other way round, so that a drift of the machine's speed
        # (another process, the CPU's clock) does not favour one side.
        if number % 2:
            headless_runs.append(wait(loop, headless(driver.model_path(), settings), check_ms=100))
        wait(loop, driver.open_new_chat(f"Speed {number}", settings))
        cpu, started = process.cpu_times(), time.perf_counter()
        assert driver.send(PROMPT)
        # Asked rarely: 500 wake-ups a second would be the benchmark's CPU, not the window's,
        # taken from the engine on a 2-core machine. The engine's stats time the tokens.
        pump_until(lambda: driver.idle() and driver.messages.rowCount() == 2, 600, "the answer", check_ms=100)
        wall, after = time.perf_counter() - started, process.cpu_times()
        cpu_shares.append((after.user + after.system - cpu.user - cpu.system) / wall)
        answer_stats = driver.messages.message(1).stats
        assert answer_stats is not None, "the answer has no stats"
        window_runs.append(answer_stats.to_dict())
        if not number % 2:
            headless_runs.append(wait(loop, headless(driver.model_path(), settings), check_ms=100))
    window_speed = statistics.median(s["tokens_per_s"] for s in window_runs)
    headless_speed = statistics.median(s["tokens_per_s"] for s in headless_runs)
    pairs = [w["tokens_per_s"] / h["tokens_per_s"] for w, h in zip(window_runs, headless_runs)]
    return {"starter_max_tokens": max_tokens, "starter_repeats": repeats,
            "window_tokens": [s["tokens"] for s in window_runs],
            "window_tokens_per_s_runs": [s["tokens_per_s"] for s in window_runs],
            "headless_tokens_per_s_runs": [s["tokens_per_s"] for s in headless_runs],
            "window_tokens_per_s": window_speed, "headless_tokens_per_s": headless_speed,
            "window_share": round(window_speed / headless_speed, 3),
            "window_share_median_of_pairs": round(statistics.median(pairs), 3),
            "window_process_cpu_share_of_a_core": round(statistics.median(cpu_shares), 3)}


async def headless(model: Path, settings) -> dict:
    """The same answer through EngineClient alone (a fresh engine, as the window's was)."""
    from app.engine.protocol import ChatMessage, Done
    from app.service.models.client import EngineClient

    client = EngineClient()
    try:
        await client.load(str(model), context_length=settings.context_length)
        async for event in client.generate([ChatMessage("user", PROMPT)], settings):
            if isinstance(event, Done):
                stats = event.stats
                return stats.to_dict() if hasattr(stats, "to_dict") else dict(stats)
    finally:
        await client.shutdown()
    raise RuntimeError("the engine ended the answer without Done")


def install_starter(home: Path) -> None:
    """The starter model as the default, so that start-up loads it."""
    from app.core.paths import data_paths
    from app.core.settings import Settings, SettingsFile
    from app.library.importer import import_model_file
    from app.library.models import ModelLibrary
    from tests.helpers.models import build_small_real

    source = home / "model source"
    source.mkdir()
    paths = data_paths().ensure()
    installed = import_model_file(ModelLibrary(paths.models), build_small_real(source))
    SettingsFile(paths.settings_file).save(Settings(default_model=installed.id))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, default=BENCHMARKS / "results" / "ui_stream.json")
    parser.add_argument("--starter", action="store_true", help="also stream the starter model")
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="the checkout whose app to measure")
    parser.add_argument("--max-tokens", type=int, default=256, help="tokens per starter answer")
    parser.add_argument("--repeats", type=int, default=3, help="starter answers in each setting")
    args = parser.parse_args()
    sys.path.insert(0, str(args.root.resolve()))
    with tempfile.TemporaryDirectory(prefix="kestrel-ui-bench ") as home:
        app, loop, window, conversation_id = build(Path(home))
        driver = WindowDriver.for_window(window)
        result = {"checkout": str(args.root.resolve()), "design": driver.design}
        if args.starter:
            install_starter(Path(home))
            wait(loop, driver.start_up())
        else:
            wait(loop, driver.open_history())
        result.update(measure_window(app, loop, driver, conversation_id))
        if args.starter:
            result.update(measure_starter(loop, driver, args.max_tokens, args.repeats))
        wait(loop, driver.shutdown())
        driver.close_history()
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
