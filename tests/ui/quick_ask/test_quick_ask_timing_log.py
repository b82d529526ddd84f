"""The startup log's quick-ask notes, which benchmarks/quick_ask.py times against: the window shown, the
first text of each quick-ask answer (once each, never for the main window's chat), its end, and the unload."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from PySide6.QtCore import Qt

from app.core.quick_ask_settings import QuickAskSettings
from app.service.events import ModelState
from app.ui.app import _log_startup_to, build_quick_ask
from tests.helpers.scripted_answers import written
from tests.helpers.scripted_engine import ScriptedEngine
from tests.ui.conftest import idle, run, service_of, until
from tests.ui.quick_ask.test_quick_window import ask
from tests.ui.quick_ask.test_reach import RecordedShortcut


def events(log: Path) -> list[str]:
    if not log.exists():  # nothing noted yet
        return []
    return [json.loads(line)["event"] for line in log.read_text(encoding="utf-8").splitlines()]


def test_each_quick_answer_notes_its_first_text_once_and_the_main_chats_answer_none(
        loop, make_window, qtbot, tmp_path: Path) -> None:
    engine = ScriptedEngine()
    engine.scripts.extend(written(answer) for answer in ("Kestrels hover.", "Voles, mostly.", "In the main window."))
    window = make_window(engine=engine)
    reach = build_quick_ask(service_of(window), window, RecordedShortcut())
    log = tmp_path / "startup.jsonl"
    _log_startup_to(str(log), window, reach=reach)
    quick = reach.window
    qtbot.addWidget(quick)

    quick.summon()
    ask(loop, quick, "What do kestrels do?", answers=1)
    ask(loop, quick, "What do they eat?", answers=2)  # a follow-up: its own answer, its own first text
    quick.hide()
    qtbot.keyClicks(window.composer.edit, "Asked in the main window")
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)
    run(loop, until(lambda: window.adapter.messages.rowCount() == 2 and idle(window)(), what="the main answer"))

    quick_notes = [e for e in events(log) if e.startswith("quick_ask_")]
    assert quick_notes == ["quick_ask_shown", "quick_ask_first_text", "quick_ask_answer_over",
                           "quick_ask_first_text", "quick_ask_answer_over"]
    notes = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert all(abs(n["at"] - n["seconds"] - notes[0]["at"] + notes[0]["seconds"]) < 1e-3 for n in notes), \
        "'at' is wall-clock time, 'seconds' the same moment counted from the process's start"


def test_the_model_unloaded_for_being_idle_is_noted(loop, make_window, qtbot, tmp_path: Path) -> None:
    window = make_window(engine=ScriptedEngine())
    reach = build_quick_ask(service_of(window), window, RecordedShortcut())
    qtbot.addWidget(reach.window)
    log = tmp_path / "startup.jsonl"
    _log_startup_to(str(log), window, reach=reach)
    assert "model_unloaded" not in events(log)
    settings = window.doors.settings
    run(loop, settings.update_settings(dataclasses.replace(  # 0.6 s without an answer, and not kept ready
        settings.settings, unload_after_minutes=0.01, quick_ask=QuickAskSettings(keep_model_ready=False))))
    run(loop, until(lambda: window.doors.model.model_state == ModelState.UNLOADED, what="the idle unload"))
    qtbot.waitUntil(lambda: "model_unloaded" in events(log))
