"""The engine's pace follows the most awake of Kestrel's windows: the quick-ask window shown while the
main window waits hidden in the tray runs the engine at full speed."""

from __future__ import annotations

import dataclasses

import pytest

from app.core.conversation import MessageState
from app.core.settings import SettingsFile
from app.service.events import Pace
from app.service.models.background import AppWindow, WindowPresence, WindowState
from tests.service.conftest import run, settings_file

F, B, H = WindowState.FOREGROUND, WindowState.BACKGROUND, WindowState.HIDDEN


@pytest.mark.parametrize("main, quick_ask, kestrel", [
    (F, H, F), (H, H, H), (H, F, F), (H, B, B), (B, H, B), (B, F, F), (F, B, F),
])
def test_kestrel_is_as_awake_as_its_most_awake_window(main, quick_ask, kestrel) -> None:
    presence = WindowPresence()
    presence.report(AppWindow.MAIN, main)
    assert presence.report(AppWindow.QUICK_ASK, quick_ask) == kestrel == presence.state


def test_a_front_end_that_never_tells_runs_in_front() -> None:
    assert WindowPresence().state == F


def test_the_quick_ask_window_shown_wakes_the_engine_the_hidden_main_window_paused(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            service, doors, engine = started.service, started.doors, started.engine
            seen = []
            doors.set_window_state(H)  # hidden to the tray: "when hidden: pause", the default
            seen.append((service.session.pace.pace, engine.paused))
            service.set_window_state(F, AppWindow.QUICK_ASK)  # summoned by the shortcut
            seen.append((service.session.pace.pace, engine.paused))
            doors.chat.send("Hello")  # the quick ask's question, asked with the main window still hidden
            await doors.chat.wait_idle()
            answer = doors.chat.messages[-1]
            # A change of settings applies the pace again: to Kestrel's state, not the main window's alone.
            await doors.settings.update_settings(dataclasses.replace(doors.settings.settings, theme="dark"))
            seen.append((service.session.pace.pace, engine.paused))
            service.set_window_state(H, AppWindow.QUICK_ASK)  # Esc: both windows away
            seen.append((service.session.pace.pace, engine.paused))
            return seen, answer

    seen, answer = run(scenario)
    assert seen == [(Pace.PAUSED, True), (Pace.FULL, False), (Pace.FULL, False), (Pace.PAUSED, True)]
    assert answer.state == MessageState.COMPLETE and answer.text


def test_a_window_hidden_before_the_settings_are_read_is_paced_by_them_once_read(started_service) -> None:
    async def scenario():
        async with started_service(start=None) as started:
            service, doors = started.service, started.doors
            file = SettingsFile(settings_file(service))
            file.save(dataclasses.replace(file.load(), when_hidden="gently"))
            doors.set_window_state(H)  # started in the tray: told before open() read the settings
            before = service.session.pace.pace
            await service.open()
            return before, service.session.pace.pace

    assert run(scenario) == (Pace.PAUSED, Pace.GENTLE)
