"""How long the window's UI thread stops answering while the user streams, scrolls,
switches chats, searches and saves settings.

    QT_QPA_PLATFORM=offscreen python benchmarks/ui_watchdog.py [--root CHECKOUT] [--starter]
        [--max-tokens N] [--answers N] [--only SCENARIO...] [--why] [--json OUT]
    python benchmarks/ui_watchdog.py --compare OLD.json [NEW.json]

A watchdog timer fires every few milliseconds on the UI thread and records how late each
tick comes: stall = actual interval - nominal interval. Any work on the UI thread (a
layout, a SQLite query, an fsync, a Python scan) delays the next tick by its length, so
the stalls are what a user feels as a frozen window. Scenarios, on the real window
(offscreen unless a display is set) with a real engine and one history of 100,000
messages, including two chats of 2,000:

- stream:  answers typed and streamed into a 2,000-message chat: the tiny test model
           (over 1,000 tokens/s here, a stress test: the chat fills its 2,048-token
           context, so an answer is at most ~512 tokens), or with --starter the real
           starter model (about 30 tokens/s on two cores, what a user sees);
- scroll:  scrolling that chat upwards half a page per frame, then back to the end;
- switch:  clicking back and forth between the two long chats in the list;
- search:  typing searches at 8 keystrokes/s into the search box;
- settings: saving a setting through File > Settings (the dialog accepted at once),
           and changing the theme the same way.

--root picks the checkout whose app is imported (sys.path), so the same scenarios run
against an older design: `git worktree add /tmp/kestrel-old 306c5fc`, then
`--root /tmp/kestrel-old --json old.json`. A small driver hides the window APIs
(window.session before the redesign; window.controller and window.adapter after; window.doors,
each part's door into the service, since the composition root of issue 36).
Prints a table (p50 / p99 / max stall per scenario) and writes JSON; --compare prints
two such files side by side against the goal (p99 <= 16 ms, max <= 50 ms). The history
is written before the window opens, in one transaction through the checkout's own
HistoryStore (after the redesign its triggers fill the FTS index as rows go in).

--why: a thread samples the UI thread's Python stack during each stall and the table
says where it was (it perturbs the figures a little: quote runs without it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
DEFAULT_ROOT = BENCHMARKS.parent
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# The offscreen platform says this for every dialog; it says nothing about the app.
QUIET_QT_MESSAGES = ("This plugin does not support propagateSizeHints()",)

TICK_MS = 4
GOAL_P99_MS = 16.0
GOAL_MAX_MS = 50.0
LONG_CHAT_MESSAGES = 2_000
HISTORY_MESSAGES = 100_000
FILLER_CHAT_MESSAGES = 200
KEYSTROKE_S = 1 / 8
SEARCHES = ["quetzal", "function", "kestrel nest", "xylophonist"]

ANSWER = ("Here is a **plan**:\n\n1. Read the file\n2. Parse it\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
          "```python\nfor line in open(path):\n    total += int(line)\n```\n")
WORDS = ("the of and to a in is it you that for this with on be are as can your not or have use will "
         "if by from at an file function value code model example data we first more should when which "
         "one also each two other then return list string number error line python window memory token "
         "answer question because there here make need time new run test change set call name type "
         "class object result output input user system text read write open close start stop").split()


# --- the watchdog --------------------------------------------------------------------


class Watchdog:
    """A precise timer on the UI thread; stop() gives how late each tick came, in ms.

    With `why`, a thread looks at the UI thread's Python stack whenever a tick is more
    than WHY_AFTER_MS late, and `culprits` counts where it was (the app's innermost frames).
    """

    WHY_AFTER_MS = 10

    def __init__(self, interval_ms: int = TICK_MS, why: bool = False) -> None:
        from PySide6.QtCore import Qt, QTimer

        self.interval_ms = interval_ms
        self._timer = QTimer()
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self._tick)
        self._last = 0.0
        self._gaps: list[float] = []
        self._why = why
        self._running = False
        self._looker = None
        self.culprits: dict[str, int] = {}

    def start(self) -> None:
        self._gaps = []
        self.culprits = {}
        self._last = time.perf_counter()
        self._timer.start()
        self._running = True
        if self._why:
            import threading

            self._looker = threading.Thread(target=self._look, args=(threading.get_ident(),), daemon=True)
            self._looker.start()

    def _tick(self) -> None:
        now = time.perf_counter()
        self._gaps.append((now - self._last) * 1000)
        self._last = now

    def stop(self) -> list[float]:
        self._timer.stop()
        self._running = False
        if self._looker is not None:
            self._looker.join()
            self._looker = None
        return [max(0.0, gap - self.interval_ms) for gap in self._gaps]

    def _look(self, ui_thread: int) -> None:
        import threading

        while self._running:
            time.sleep(0.005)
            if (time.perf_counter() - self._last) * 1000 > self.interval_ms + self.WHY_AFTER_MS:
                frames = sys._current_frames()
                where = _where(frames.get(ui_thread))
                if "/" not in where:
                    # Not in the app's Python: in Qt's C++, or waiting for the GIL that
                    # another thread holds; say what the others were doing.
                    others = [_where(frame) for ident, frame in frames.items()
                              if ident not in (ui_thread, threading.get_ident()) and not _waiting(frame)]
                    where += " | busy: " + ("; ".join(others) or "no other thread in Python")
                self.culprits[where] = self.culprits.get(where, 0) + 1


# Where a thread waits for work, holding no GIL: not a suspect for a stall.
_WAITS = {"wait", "recv", "_recv", "_recv_bytes", "poll", "select", "get", "acquire", "sleep", "_worker",
          "_wait_for_tstate_lock", "readinto", "accept"}


def _waiting(frame) -> bool:
    return frame is None or frame.f_code.co_name in _WAITS


def _where(frame) -> str:
    """A thread's innermost frames in the app (or else its innermost frame), read without
    touching the disk (traceback would read the source lines)."""
    names = []
    while frame is not None:
        path = frame.f_code.co_filename
        names.append((path, f"{Path(path).parent.name}/{Path(path).name}:{frame.f_code.co_name}"))
        frame = frame.f_back
    mine = [name for path, name in reversed(names) if "/app/" in path]
    if not mine and names:
        mine = [names[0][1].split("/", 1)[1]]
    return " > ".join(mine[-3:])


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def summary(stalls: list[float], seconds: float, **extra) -> dict:
    return {"ticks": len(stalls), "seconds": round(seconds, 2),
            "p50_ms": round(percentile(stalls, 0.50), 2), "p99_ms": round(percentile(stalls, 0.99), 2),
            "max_ms": round(max(stalls, default=0.0), 2),
            "stalls_over_16_ms": sum(1 for s in stalls if s > GOAL_P99_MS),
            "stalls_over_50_ms": sum(1 for s in stalls if s > GOAL_MAX_MS), **extra}


def meets_goal(row: dict) -> bool:
    return row["p99_ms"] <= GOAL_P99_MS and row["max_ms"] <= GOAL_MAX_MS


# --- pumping Qt (and asyncio through qasync) -----------------------------------------


def pump_until(done: Callable[[], bool], timeout: float, what: str, check_ms: int = 2) -> None:
    """Run a Qt event loop (which runs asyncio's callbacks) until done() or the timeout.

    A real event loop, as the app's: it sleeps in the platform's event wait, so timers
    and the engine's pipe are served as they are in use. (QTest.qWait sleeps in slices
    of up to 10 ms between event passes, which would show up as stalls.) done() is
    asked every check_ms: often enough to play actions on time, but each wake-up is
    work the app itself would not do.
    """
    from PySide6.QtCore import QEventLoop, QTimer

    if done():
        return
    deadline = time.monotonic() + timeout
    loop = QEventLoop()
    check = QTimer()
    check.setInterval(check_ms)
    check.timeout.connect(lambda: (done() or time.monotonic() > deadline) and loop.quit())
    check.start()
    loop.exec()
    check.stop()
    if not done():
        raise TimeoutError(f"timed out after {timeout} s waiting for {what}")


def pump_for(seconds: float) -> None:
    end = time.monotonic() + seconds
    pump_until(lambda: time.monotonic() >= end, seconds + 5, "a pause")


def wait(loop, awaitable, timeout: float = 600, check_ms: int = 2):
    import asyncio

    task = asyncio.ensure_future(awaitable, loop=loop)
    pump_until(task.done, timeout, "a task", check_ms)
    return task.result()


def play(actions: list[tuple[float, Callable[[], None]]]) -> None:
    """Call each action at its time (seconds from now), processing events in between."""
    started = time.monotonic()
    for at, action in actions:
        pump_until(lambda: time.monotonic() - started >= at, at + 60, "the next action")
        action()


# --- the two window designs ----------------------------------------------------------


class WindowDriver:
    """What the scenarios do to a window, whichever design the checkout has."""

    design = ""

    def __init__(self, window) -> None:
        self.window = window

    @staticmethod
    def for_window(window) -> WindowDriver:
        if hasattr(window, "doors"):
            return DoorsDriver(window)
        return NewDriver(window) if hasattr(window, "controller") else OldDriver(window)


class OldDriver(WindowDriver):
    """Before the redesign: a ChatSession QObject on the window (window.session)."""

    design = "old (ChatSession)"

    @property
    def messages(self):
        return self.window.session.messages

    def start_up(self):
        return self.window.session.start_up()

    async def open_history(self) -> None:
        pass  # ChatSession opened it on the UI thread, in build_window.

    def idle(self) -> bool:
        return not self.window.session.busy and not self.window.session.queued

    def message_count(self) -> int:
        return self.messages.rowCount()

    def conversation_id(self) -> int | None:
        return self.window.session.conversation_id

    async def open_new_chat(self, title: str, settings) -> None:
        session = self.window.session
        session.new_conversation()
        session.open_conversation(session._ensure_conversation(title))
        session.set_conversation_settings("", settings)

    def send(self, text: str) -> bool:
        return self.window.session.send(text)

    def model_path(self) -> Path:
        return Path(self.window.session.model.path)

    def shutdown(self):
        return self.window.session.shutdown()

    def close_history(self) -> None:
        self.window.session.store.close()


class NewDriver(WindowDriver):
    """After it: a plain-asyncio ChatController behind a ControllerAdapter (the service adapter then)."""

    design = "new (ChatController)"

    @property
    def messages(self):
        return self.window.adapter.messages

    def start_up(self):
        return self.window.controller.start_up()

    def open_history(self):
        return self.window.controller.open()

    def idle(self) -> bool:
        c = self.window.controller
        if not hasattr(c, "answering_id"):  # before answers queued per chat (issue 14)
            return not c.busy and not c.queued
        return c.answering_id is None and not c.waiting_ids and not c.open_chat_busy

    def message_count(self) -> int:
        return len(self.messages.messages())  # its rows are the newest messages only

    def conversation_id(self) -> int | None:
        conversation = self.window.controller.conversation
        return conversation.id if conversation is not None else None

    async def open_new_chat(self, title: str, settings) -> None:
        controller = self.window.controller
        controller.new_conversation()
        await controller.set_conversation_settings("", settings)

    def send(self, text: str) -> bool:
        return self.window.controller.send(text)

    def model_path(self) -> Path:
        return Path(self.window.controller.model.path)

    def shutdown(self):
        return self.window.controller.shutdown()

    def close_history(self) -> None:
        pass  # shutdown() closed it on the writer thread.


class DoorsDriver(NewDriver):
    """Since issue 36: the window holds its doors into the service (window.doors), no controller."""

    design = "doors (Service)"

    def start_up(self):
        return self.window.doors.start_up()

    def idle(self) -> bool:
        chat = self.window.doors.chat
        return chat.answering_id is None and not chat.waiting_ids and not chat.open_chat_busy

    def conversation_id(self) -> int | None:
        conversation = self.window.doors.chat.conversation
        return conversation.id if conversation is not None else None

    async def open_new_chat(self, title: str, settings) -> None:
        chat = self.window.doors.chat
        chat.new_conversation()
        await chat.set_conversation_settings("", settings)

    def send(self, text: str) -> bool:
        return self.window.doors.chat.send(text)

    def model_path(self) -> Path:
        return Path(self.window.doors.model.model.path)

    def shutdown(self):
        return self.window.doors.shutdown()


def build_any_window(paths):
    """The checkout's window: over a Service (the composition root) where it has one, else from the paths alone."""
    from app.ui import app as ui_app

    if hasattr(ui_app, "build_service"):
        return ui_app.build_window(ui_app.build_service(paths), paths)
    return ui_app.build_window(paths)


# --- the history and the model -------------------------------------------------------


def filler_text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 60)))


def build_history(path: Path, generation) -> tuple[int, int]:
    """100,000 messages in one transaction; returns the two long chats' ids (A on top)."""
    from app.core.conversation import Role
    from app.core.store.history import HistoryStore

    rng = random.Random(7)
    store = HistoryStore(path)
    columns = {row[1] for row in store._conn.execute("PRAGMA table_info(messages)")}
    fold = _search_fold() if "folded" in columns else None
    long_chats = []
    with store.transaction() as conn:
        fillers = (HISTORY_MESSAGES - 2 * LONG_CHAT_MESSAGES) // FILLER_CHAT_MESSAGES
        for number in range(fillers):
            conversation = store.create_conversation(f"Chat {number}", settings=generation)
            _insert(conn, fold, conversation.id, [filler_text(rng) for _ in range(FILLER_CHAT_MESSAGES)], Role)
        for title in ("Long chat B", "Long chat A"):
            conversation = store.create_conversation(title, settings=generation)
            texts = [f"Question {i}: what about item {i}?" if i % 2 == 0 else f"Answer {i}\n\n{ANSWER}"
                     for i in range(LONG_CHAT_MESSAGES)]
            _insert(conn, fold, conversation.id, texts, Role)
            long_chats.append(conversation.id)
        # The long chats are the newest: A first in the list, B second.
        conn.execute("UPDATE conversations SET updated = updated + 10 WHERE id = ?", (long_chats[0],))
        conn.execute("UPDATE conversations SET updated = updated + 20 WHERE id = ?", (long_chats[1],))
    store.close()
    return long_chats[1], long_chats[0]


def _search_fold():
    from app.core.store.history_schema import search_fold

    return search_fold


def _insert(conn, fold, conversation_id: int, texts: list[str], Role) -> None:
    now = time.time()
    rows = [(conversation_id, (Role.USER if i % 2 == 0 else Role.ASSISTANT).value, text, now, "complete")
            + ((fold(text),) if fold else ()) for i, text in enumerate(texts)]
    columns = "conversation_id, role, text, created, state" + (", folded" if fold else "")
    marks = ", ".join("?" * len(rows[0]))
    conn.executemany(f"INSERT INTO messages ({columns}) VALUES ({marks})", rows)


def install_model(paths, model: Path, generation) -> None:
    from app.core.settings import Settings, SettingsFile
    from app.library.importer import import_model_file
    from app.library.models import ModelLibrary

    installed = import_model_file(ModelLibrary(paths.models), model)
    SettingsFile(paths.settings_file).save(Settings(default_model=installed.id, generation=generation))


# --- scenarios -----------------------------------------------------------------------


def open_by_click(window, conversation_id: int) -> None:
    """Click the chat's row in the list, as a user does."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    view = window.conversation_list
    model = view.model()
    for row in range(model.rowCount()):
        index = model.index(row, 0)
        if index.data(Qt.ItemDataRole.UserRole + 1) == conversation_id:
            view.scrollTo(index)
            QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.visualRect(index).center())
            return
    raise LookupError(f"chat {conversation_id} is not in the list")


def showing(driver: WindowDriver, conversation_id: int) -> Callable[[], bool]:
    return lambda: (driver.conversation_id() == conversation_id
                    and driver.message_count() >= LONG_CHAT_MESSAGES)


def scenario_stream(driver: WindowDriver, dog: Watchdog, chat_a: int, answers: int) -> dict:
    """Type a question, press Return, wait for the whole answer; `answers` times."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    window = driver.window
    open_by_click(window, chat_a)
    pump_until(showing(driver, chat_a), 60, "chat A")
    pump_for(0.5)
    stats, seconds, stalls = [], 0.0, []
    for number in range(answers):
        QTest.keyClicks(window.composer.edit, f"Write a long story about kestrel number {number}.")
        rows = driver.messages.rowCount()
        started = time.perf_counter()
        dog.start()
        QTest.keyClick(window.composer.edit, Qt.Key.Key_Return)
        pump_until(lambda: driver.messages.rowCount() > rows + 1 and driver.idle(), 600, "the answer")
        seconds += time.perf_counter() - started
        stalls += dog.stop()
        answer = driver.messages.message(driver.messages.rowCount() - 1)
        stats.append((answer.stats.to_dict() if answer.stats is not None else {}) | {"chars": len(answer.text)})
        pump_for(0.3)
    return summary(stalls, seconds, answers=answers, tokens=sum(s.get("tokens", 0) for s in stats),
                   tokens_per_s=[s.get("tokens_per_s") for s in stats],
                   answer_chars=sum(s["chars"] for s in stats))


def scenario_scroll(driver: WindowDriver, dog: Watchdog) -> dict:
    view = driver.window.messages
    bar = view.verticalScrollBar()
    view.scroll_to_end()
    pump_for(0.3)
    steps = 120
    actions = [(0.016 * step, lambda step=step: bar.setValue(bar.maximum() - step * bar.pageStep() // 2))
               for step in range(1, steps + 1)]
    actions.append((0.016 * steps + 0.3, view.scroll_to_end))
    started = time.perf_counter()
    dog.start()
    play(actions)
    pump_for(0.3)
    return summary(dog.stop(), time.perf_counter() - started, steps=steps + 1)


def scenario_switch(driver: WindowDriver, dog: Watchdog, chat_a: int, chat_b: int) -> dict:
    window = driver.window
    switches = []
    started = time.perf_counter()
    dog.start()
    for number in range(10):
        target = chat_b if number % 2 == 0 else chat_a
        clicked = time.perf_counter()
        open_by_click(window, target)
        pump_until(showing(driver, target), 60, "the other chat")
        switches.append((time.perf_counter() - clicked) * 1000)
        pump_for(0.25)
    return summary(dog.stop(), time.perf_counter() - started, switches=len(switches),
                   switch_ms_median=round(sorted(switches)[len(switches) // 2], 1))


def scenario_search(driver: WindowDriver, dog: Watchdog) -> dict:
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    edit = driver.window.search
    edit.setFocus()
    actions: list[tuple[float, Callable[[], None]]] = []
    at = 0.0
    for query in SEARCHES:
        for character in query:
            actions.append((at, lambda c=character: QTest.keyClicks(edit, c)))
            at += KEYSTROKE_S
        at += 0.8  # reading the result
        actions.append((at, lambda: QTest.keyClick(edit, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)))
        at += KEYSTROKE_S
        actions.append((at, lambda: QTest.keyClick(edit, Qt.Key.Key_Backspace)))
        at += 0.6
    started = time.perf_counter()
    dog.start()
    play(actions)
    pump_for(0.3)
    keystrokes = sum(len(q) + 2 for q in SEARCHES)
    return summary(dog.stop(), time.perf_counter() - started, keystrokes=keystrokes,
                   history_messages=HISTORY_MESSAGES)


def scenario_settings(driver: WindowDriver, dog: Watchdog, change: str) -> dict:
    """Save the settings through the dialog six times; change is "temperature" or "theme"."""
    from app.ui.settings.dialogs import SettingsDialog

    window = driver.window
    saves = 6

    def accept(dialog, number: int) -> int:
        if change == "theme":
            dialog.theme.setCurrentIndex(dialog.theme.findData("dark" if number % 2 == 0 else "light"))
        else:
            dialog.form.temperature.setValue(0.5 if number % 2 == 0 else 0.6)
        return 1

    original = SettingsDialog.exec
    actions = []
    for number in range(saves):
        def save(number=number) -> None:
            SettingsDialog.exec = lambda dialog: accept(dialog, number)
            window.edit_settings()
        actions.append((0.4 * number, save))
    started = time.perf_counter()
    dog.start()
    try:
        play(actions)
        pump_for(0.6)
    finally:
        SettingsDialog.exec = original
    return summary(dog.stop(), time.perf_counter() - started, saves=saves)


# --- running -------------------------------------------------------------------------


def run_scenarios(home: Path, use_starter: bool, max_tokens: int, answers: int, why: bool,
                  only: list[str]) -> dict:
    import asyncio

    import qasync
    from PySide6.QtCore import qInstallMessageHandler
    from PySide6.QtWidgets import QApplication

    from app.core.generation import GenerationSettings
    from app.core.paths import data_paths
    from tests.helpers.models import build_small_real, build_tiny

    os.environ["KESTREL_HOME"] = str(home)
    paths = data_paths().ensure()
    # The long chat fills the context; the engine leaves a quarter of it for the answer.
    context = 2048
    generation = GenerationSettings(max_tokens=max_tokens, temperature=0.0, seed=1, context_length=context)
    source = home / "model source"
    source.mkdir()
    model = (build_small_real if use_starter else build_tiny)(source)
    install_model(paths, model, generation)
    started = time.perf_counter()
    chat_b, chat_a = build_history(paths.history_db, generation)
    built_s = time.perf_counter() - started

    app = QApplication.instance() or QApplication([])
    qInstallMessageHandler(_print_qt_message)
    loop = qasync.QEventLoop(app, already_running=True)
    asyncio.set_event_loop(loop)
    window = build_any_window(paths)
    window.resize(1100, 760)
    window.show()
    driver = WindowDriver.for_window(window)
    wait(loop, driver.start_up())
    pump_for(1.0)
    dog = Watchdog(why=why)
    rows = {}
    try:
        scenarios: list[tuple[str, Callable[[], dict]]] = [
            ("stream", lambda: scenario_stream(driver, dog, chat_a, answers)),
            ("scroll", lambda: scenario_scroll(driver, dog)),
            ("switch", lambda: scenario_switch(driver, dog, chat_a, chat_b)),
            ("search", lambda: scenario_search(driver, dog)),
            ("settings (temperature)", lambda: scenario_settings(driver, dog, "temperature")),
            ("settings (theme)", lambda: scenario_settings(driver, dog, "theme")),
        ]
        for name, scenario in scenarios:
            if only and not any(name.startswith(wanted) for wanted in only):
                continue
            rows[name] = scenario()
            if why:
                ranked = sorted(dog.culprits.items(), key=lambda item: -item[1])[:5]
                rows[name]["stalled_in"] = {where: count for where, count in ranked}
    finally:
        wait(loop, driver.shutdown())
        driver.close_history()
        window.close()
        loop.stop()
        asyncio.events._set_running_loop(None)
        loop.close()
    return {"design": driver.design, "model": model.name, "max_tokens": max_tokens, "context_length": context,
            "history_build_s": round(built_s, 1), "scenarios": rows}


def _print_qt_message(_kind, _context, message: str) -> None:
    if message not in QUIET_QT_MESSAGES:
        print(f"Qt: {message}", file=sys.stderr)


def print_table(result: dict) -> None:
    print(f"{result['design']} — {result['checkout']} — model {result['model']}")
    print(f"{'scenario':<24}{'p50 ms':>8}{'p99 ms':>8}{'max ms':>8}{'ticks':>7}  goal")
    for name, row in result["scenarios"].items():
        print(f"{name:<24}{row['p50_ms']:>8.1f}{row['p99_ms']:>8.1f}{row['max_ms']:>8.1f}{row['ticks']:>7}  "
              f"{'met' if meets_goal(row) else 'NOT met'}")
    for name, row in result["scenarios"].items():
        for where, count in row.get("stalled_in", {}).items():
            print(f"  {name}: {count:>4} × {where}")
    stream = result["scenarios"].get("stream", {})
    if stream.get("tokens"):
        print(f"\nstream: {stream['answers']} answers, {stream['tokens']} tokens in all, "
              f"{stream['answer_chars']} characters, tok/s per answer {stream['tokens_per_s']}")


def print_comparison(old: dict, new: dict) -> None:
    print(f"old: {old['design']} ({old['checkout']}, {old['model']})")
    print(f"new: {new['design']} ({new['checkout']}, {new['model']})")
    print(f"goal: p99 <= {GOAL_P99_MS:g} ms and max <= {GOAL_MAX_MS:g} ms\n")
    print(f"{'':<24}{'old p50/p99/max ms':>22}   {'new p50/p99/max ms':>22}  new meets goal")
    for name, row in new["scenarios"].items():
        before = old["scenarios"].get(name)
        left = f"{before['p50_ms']:.1f} / {before['p99_ms']:.1f} / {before['max_ms']:.1f}" if before else "—"
        right = f"{row['p50_ms']:.1f} / {row['p99_ms']:.1f} / {row['max_ms']:.1f}"
        print(f"{name:<24}{left:>22}   {right:>22}  {'yes' if meets_goal(row) else 'NO'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="the checkout whose app to measure")
    parser.add_argument("--starter", action="store_true", help="stream the starter model (else the tiny one)")
    parser.add_argument("--max-tokens", type=int, default=None,
                        help="tokens to stream (default 1500 tiny, 300 starter)")
    parser.add_argument("--answers", type=int, default=3, help="answers streamed one after another")
    parser.add_argument("--only", nargs="+", default=[], metavar="SCENARIO",
                        help="run only these scenarios (stream, scroll, switch, search, settings)")
    parser.add_argument("--why", action="store_true",
                        help="also sample the UI thread's stack during stalls and print where it was")
    parser.add_argument("--json", type=Path, default=BENCHMARKS / "results" / "ui_watchdog.json")
    parser.add_argument("--compare", type=Path, nargs="+", metavar="JSON",
                        help="print OLD.json against NEW.json (default: --json) and exit")
    args = parser.parse_args()
    if args.compare:
        old = json.loads(args.compare[0].read_text())
        new = json.loads((args.compare[1] if len(args.compare) > 1 else args.json).read_text())
        print_comparison(old, new)
        return 0
    root = args.root.resolve()
    sys.path.insert(0, str(root))
    max_tokens = args.max_tokens or (300 if args.starter else 1500)
    with tempfile.TemporaryDirectory(prefix="kestrel-watchdog ") as home:
        result = run_scenarios(Path(home), args.starter, max_tokens, args.answers, args.why, args.only)
    result = {"checkout": str(root), **result, "tick_ms": TICK_MS,
              "goal": {"p99_ms": GOAL_P99_MS, "max_ms": GOAL_MAX_MS},
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                          "python": platform.python_version(), "load_1min": os.getloadavg()[0]}}
    print_table(result)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2))
    print(f"\nwritten: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
