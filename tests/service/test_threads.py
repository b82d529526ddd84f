"""The engine's thread count: from what is free, stepped down after a collapse, remembered."""

from __future__ import annotations

from pathlib import Path

from app.engine.backends.resources import default_threads
from app.service.models.threads import STEP_DOWN_KEPT_S, ThreadAdvisor
from app.service.library.hardware_overview import hardware_overview
from tests.service.conftest import run, session_of, set_busy_cores

MODEL = "starter.gguf|1000|2|2"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_quiet_machine_gets_every_core_and_a_busy_one_what_is_free() -> None:
    busy = [0.1]
    advisor = ThreadAdvisor(None, cores=4, busy=lambda: busy[0])
    assert advisor.choose(MODEL).threads == 4 and "quiet" in advisor.last.reason
    busy[0] = 1.1
    choice = advisor.choose(MODEL)
    assert choice.threads == 3 and "about 1.1 busy" in choice.reason
    busy[0] = 7.0  # never none
    assert advisor.choose(MODEL).threads == 1
    assert advisor.choose(MODEL, asked=6).threads == 6, "a count set in Settings wins"


def test_a_collapse_steps_the_threads_down_for_the_next_answers_then_is_forgotten() -> None:
    clock = Clock()
    advisor = ThreadAdvisor(None, cores=2, busy=lambda: 0.0, clock=clock)
    advisor.record(MODEL, threads=2, tokens=300, tokens_per_s=30.0)
    advisor.record(MODEL, threads=2, tokens=300, tokens_per_s=0.7)  # another program took a core
    choice = advisor.choose(MODEL)
    assert choice.threads == 1 and "0.7 tokens/s against 30.0" in choice.reason
    advisor.record(MODEL, threads=2, tokens=5, tokens_per_s=0.1)  # too short to say anything
    assert advisor.choose(MODEL).threads == 1
    clock.now += STEP_DOWN_KEPT_S + 1
    assert advisor.choose(MODEL).threads == 2, "the load may have gone: all cores again"


def test_what_was_learnt_is_kept_for_the_next_run(tmp_path: Path) -> None:
    path = tmp_path / "threads.json"
    first = ThreadAdvisor(path, cores=2, busy=lambda: 0.0)
    first.record(MODEL, threads=2, tokens=300, tokens_per_s=30.0)
    first.record(MODEL, threads=2, tokens=300, tokens_per_s=0.9)
    first.save()
    again = ThreadAdvisor(path, cores=2, busy=lambda: 0.0)
    again.load()
    assert again.choose(MODEL).threads == 1
    path.write_text("{not json")
    damaged = ThreadAdvisor(path, cores=2, busy=lambda: 0.0)
    damaged.load()  # a damaged file is a lost hint, not an error
    assert damaged.choose(MODEL).threads == 2


def test_each_answer_runs_with_the_chosen_threads_and_says_so(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            service, doors = started.service, started.doors
            set_busy_cores(service, lambda: 1.0)  # one core of two taken by another program
            doors.chat.send("Hello")
            await doors.chat.wait_idle()
            first = doors.chat.messages[-1].stats
            set_busy_cores(service, lambda: 0.0)
            doors.chat.send("Again")
            await doors.chat.wait_idle()
            second = doors.chat.messages[-1].stats
            report = (await hardware_overview(session_of(service))).text
            asked = [request.threads for request in started.engine.requests[1:]]
            return first, second, report, asked

    first, second, report, asked = run(scenario)
    cores = default_threads()
    assert first.threads == max(1, cores - 1) and second.threads == cores
    assert asked == [max(1, cores - 1), cores], "each answer asked the engine for its threads"
    assert f"CPU threads for the last answer: {cores} (all {cores} physical cores" in report


def test_the_busy_meter_sees_a_busy_core_from_its_first_answer_even_when_looked_at_in_quick_succession() -> None:
    # A real program keeping one core busy. `kestrel chat` answers once, right after the load: the meter must
    # have measured by then, and looks closer than 0.2 s apart must not keep restarting the span.
    import os
    import subprocess
    import sys
    import time

    from app.service.models.threads import BusyMeter

    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # the spinner is running before the meter starts
        meter = BusyMeter(lambda: [os.getpid()])
        looks = []
        for _ in range(5):
            time.sleep(0.12)
            looks.append(meter.look())
        assert looks[0] == 0.0, "0.12 s is too short to measure"
        assert looks[-1] >= 0.6, f"one core busy, measured {looks}"
    finally:
        spinner.kill()
        spinner.wait()


def test_an_answer_decoded_on_a_gpu_teaches_neither_the_threads_nor_the_cpus_speed(started_service) -> None:
    # Its tokens/s would make the CPU look ten times faster to the speed prediction, and step the threads for nothing.
    from app.core.answer_stats import AnswerStats

    async def scenario():
        async with started_service() as started:
            session = session_of(started.service)
            session.learn_threads(AnswerStats(tokens=100, tokens_per_s=80.0, threads=2,
                                              device="GPU: NVIDIA GeForce RTX 4070 (20 layers, the rest on the CPU)"))
            on_gpu = session.threads.measured()
            session.learn_threads(AnswerStats(tokens=100, tokens_per_s=8.0, threads=2, device="CPU"))
            return on_gpu, session.threads.measured()

    on_gpu, on_cpu = run(scenario)
    assert on_gpu == {} and [entry["best"] for entry in on_cpu.values()] == [{"2": 8.0}]
