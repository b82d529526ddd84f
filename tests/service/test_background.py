"""The background policy (table-driven, no Qt), its priority calls, and the real engine's
nice value while Kestrel runs gently."""

from __future__ import annotations

import ctypes
import dataclasses
import os

import psutil
import pytest

from app.hardware import power as power_module
from app.hardware.power import Power, power_from_status
from app.service.models import priority
from app.service.events import Pace
from app.service.models.background import EnginePace, WindowState, pace_for, pace_words
from app.service.models.client import EngineClient
from tests.service.conftest import engine_of, priority_problem, run, set_busy_cores

F, B, H = WindowState.FOREGROUND, WindowState.BACKGROUND, WindowState.HIDDEN
MAINS, BATTERY, SAVER = Power(), Power(on_battery=True), Power(on_battery=True, saver=True)


@pytest.mark.parametrize("window, power, when_hidden, when_in_background, expected", [
    (F, MAINS, "pause", "full", Pace.FULL),
    (F, SAVER, "pause", "gently", Pace.FULL),  # watched: always full speed
    (B, MAINS, "pause", "full", Pace.FULL),  # the defaults
    (H, MAINS, "pause", "full", Pace.PAUSED),
    (B, MAINS, "pause", "gently", Pace.GENTLE),
    (H, MAINS, "gently", "full", Pace.GENTLE),
    (H, MAINS, "full", "full", Pace.FULL),
    (B, BATTERY, "pause", "full", Pace.FULL),  # on battery, saver off: as chosen
    (B, SAVER, "pause", "full", Pace.GENTLE),  # battery saver: full speed becomes gently
    (H, SAVER, "full", "full", Pace.GENTLE),
    (H, SAVER, "pause", "full", Pace.PAUSED),  # pause stays pause
])
def test_the_pace_for_each_window_power_and_setting(window, power, when_hidden, when_in_background,
                                                      expected) -> None:
    assert pace_for(window, power, when_hidden=when_hidden, when_in_background=when_in_background) == expected


def test_the_status_bar_says_why() -> None:
    assert pace_words(Pace.PAUSED, H) == "Paused — window hidden"
    assert pace_words(Pace.GENTLE, B) == "Running gently in the background"
    assert pace_words(Pace.FULL, F) is None


class FakeClient:
    def __init__(self) -> None:
        self.pid: int | None = 4242
        self.calls: list[str] = []

    def pause(self) -> None:
        self.calls.append("pause")

    def resume(self) -> None:
        self.calls.append("resume")


def test_a_sequence_of_window_states_becomes_engine_commands() -> None:
    client, gentle = FakeClient(), []
    pace = EnginePace(client, lambda: MAINS, lambda pid, on: gentle.append((pid, on)))
    settings = {"when_hidden": "pause", "when_in_background": "gently"}
    for window in (B, H, F, F, B, F):
        pace.update(window, **settings)
    assert client.calls == ["pause", "resume"]  # hidden paused it; the foreground went on
    # gently in the background, then (paused: no priority change), full, gently, full again
    assert gentle == [(4242, True), (4242, False), (4242, True), (4242, False)]
    pace.loaded()  # a new engine starts at normal priority: told again what it should be
    assert gentle[-1] == (4242, False)


def test_windows_power_status_as_recorded() -> None:
    # GetSystemPowerStatus: ACLineStatus 0 battery, 1 mains, 255 unknown; SystemStatusFlag 1 saver.
    assert power_from_status(1, 0) == Power(on_battery=False, saver=False)
    assert power_from_status(0, 0) == Power(on_battery=True, saver=False)
    assert power_from_status(0, 1) == Power(on_battery=True, saver=True)
    assert power_from_status(255, 0) == Power(on_battery=False, saver=False)


def test_power_without_a_battery_reads_as_mains(monkeypatch) -> None:
    monkeypatch.setattr(power_module.psutil, "sensors_battery", lambda: None)
    assert power_module.read_power() == Power()


class FakeKernel32:
    """Records what Kestrel asks of Windows, answering as Windows 11 does."""

    def __init__(self, has_api: bool = True) -> None:
        self.calls: list[tuple] = []
        if has_api:
            self.SetProcessInformation = self._set

    def OpenProcess(self, access, inherit, pid):
        self.calls.append(("OpenProcess", access, inherit, pid))
        return 99

    def _set(self, handle, info_class, state, size):
        value = ctypes.cast(state, ctypes.POINTER(priority._PowerThrottlingState)).contents
        self.calls.append(("SetProcessInformation", handle, info_class, value.Version, value.ControlMask,
                           value.StateMask, size))
        return 1

    def CloseHandle(self, handle):
        self.calls.append(("CloseHandle", handle))
        return 1


def test_efficiency_mode_is_turned_on_and_explicitly_off(monkeypatch) -> None:
    kernel = FakeKernel32()
    monkeypatch.setattr(priority, "_kernel32", lambda: kernel)
    assert priority.windows_eco_qos(1234, True) and priority.windows_eco_qos(1234, False)
    size = ctypes.sizeof(priority._PowerThrottlingState)
    assert kernel.calls == [
        ("OpenProcess", 0x0200, False, 1234), ("SetProcessInformation", 99, 4, 1, 1, 1, size), ("CloseHandle", 99),
        ("OpenProcess", 0x0200, False, 1234), ("SetProcessInformation", 99, 4, 1, 1, 0, size), ("CloseHandle", 99),
    ]


def test_windows_10_without_the_api_does_not_fail(monkeypatch) -> None:
    monkeypatch.setattr(priority, "_kernel32", lambda: FakeKernel32(has_api=False))
    assert priority.windows_eco_qos(1234, True) is False
    problem = priority.set_gentle(os.getpid(), False, eco_qos=priority.windows_eco_qos)
    assert problem and "Efficiency mode" in problem


def _engine_nice(pid: int) -> set[int]:
    return {os.getpriority(os.PRIO_PROCESS, thread.id) for thread in psutil.Process(pid).threads()}


@pytest.mark.skipif(os.name != "posix", reason="nice values are POSIX")
def test_the_real_engine_runs_gently_behind_another_app_and_at_full_speed_in_front(started_service) -> None:
    async def scenario():
        async with started_service(engine=EngineClient()) as started:
            service, doors = started.service, started.doors
            await doors.settings.update_settings(dataclasses.replace(doors.settings.settings,
                                                                     when_in_background="gently"))
            pid = engine_of(service).pid
            seen = [_engine_nice(pid)]
            doors.set_window_state(WindowState.BACKGROUND)
            seen.append(_engine_nice(pid))
            doors.set_window_state(WindowState.FOREGROUND)
            seen.append(_engine_nice(pid))
            return seen, priority_problem(service)

    seen, problem = run(scenario)
    assert seen[0] == {0} and seen[1] == {priority.GENTLE_NICE}, seen
    if os.geteuid() == 0:  # an unprivileged process may not lower a nice value again
        assert seen[2] == {0} and problem is None
    else:
        assert seen[2] == {priority.GENTLE_NICE} and "normal priority back" in (problem or "")


def test_gently_with_fewer_threads_halves_the_next_answers_threads(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            service, doors = started.service, started.doors
            await doors.settings.update_settings(dataclasses.replace(
                doors.settings.settings, when_in_background="gently", gentle_fewer_threads=True))
            set_busy_cores(service, lambda: 0.0)
            doors.set_window_state(WindowState.BACKGROUND)
            doors.chat.send("Hello")
            await doors.chat.wait_idle()
            gentle = doors.chat.messages[-1].stats.threads
            doors.set_window_state(WindowState.FOREGROUND)
            doors.chat.send("Again")
            await doors.chat.wait_idle()
            full = doors.chat.messages[-1].stats.threads
            return gentle, full

    gentle, full = run(scenario)
    assert gentle == max(1, full // 2) and full >= 1


def test_an_api_answer_is_slowed_but_never_held_by_a_hidden_window() -> None:
    client, gentle = FakeClient(), []
    pace = EnginePace(client, lambda: MAINS, lambda pid, on: gentle.append((pid, on)))
    pace.update(H, when_hidden="pause", when_in_background="full")
    assert pace.pace == Pace.PAUSED and client.calls == ["pause"]
    assert pace.serve(True) and pace.pace == Pace.GENTLE and client.calls == ["pause", "resume"]
    assert not pace.update(H, when_hidden="pause", when_in_background="full"), "still serving: still gentle"
    assert pace.serve(False) and pace.pace == Pace.PAUSED and client.calls == ["pause", "resume", "pause"]
    assert pace_for(F, MAINS, when_hidden="pause", when_in_background="pause", serving=True) == Pace.FULL
