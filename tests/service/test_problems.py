"""Problems say what they are about, and an engine failure is taken back (ProblemSolved) once a
new engine has loaded the model, so a banner about it does not stay up for ever."""

from __future__ import annotations

import dataclasses
import os
import signal

import pytest

from app.service import events as ev
from tests.service.conftest import SMALL, Recorder, install, make_controller, run

pytestmark = pytest.mark.skipif(os.name == "nt", reason="SIGKILL stands in for a crash")


def test_an_engine_dying_mid_answer_is_an_engine_problem_solved_by_the_next_engine(tiny_model) -> None:
    async def scenario():
        install(tiny_model, dataclasses.replace(SMALL, max_tokens=100_000))
        controller = make_controller()
        recorder = Recorder(controller)
        await controller.start_up()
        assert controller.send("Keep talking")
        await recorder.until(lambda: recorder.of(ev.TextGrew), what="the answer")
        os.kill(controller.session.client.pid, signal.SIGKILL)
        await controller.wait_idle()
        problem = recorder.of(ev.Problem)[-1]
        assert problem.kind == "engine" and "stopped unexpectedly" in problem.text
        assert recorder.of(ev.ProblemSolved) == []
        await controller.set_conversation_settings("", dataclasses.replace(SMALL, max_tokens=4))
        assert controller.send("Back?")
        await controller.wait_idle()
        assert recorder.of(ev.ProblemSolved) == [ev.ProblemSolved("engine")]
        solved_at = recorder.events.index(ev.ProblemSolved("engine"))
        ready_at = max(i for i, e in enumerate(recorder.events[:solved_at])
                       if isinstance(e, ev.ModelStateChanged) and e.state == ev.ModelState.READY)
        assert ready_at == solved_at - 1, "solved once the new engine has the model"
        await controller.shutdown()

    run(scenario)


def test_an_engine_dying_between_answers_is_solved_when_the_next_message_loads_it(tiny_model) -> None:
    async def scenario():
        install(tiny_model)
        controller = make_controller()
        recorder = Recorder(controller)
        await controller.start_up()
        os.kill(controller.session.client.pid, signal.SIGKILL)
        await recorder.until(lambda: controller.model_state == ev.ModelState.FAILED, what="the report")
        assert controller.send("Still there?")
        await controller.wait_idle()
        assert recorder.of(ev.ProblemSolved) == [ev.ProblemSolved("engine")]
        # A second, ordinary load says nothing more.
        await controller.load_model(controller.model)
        assert recorder.of(ev.ProblemSolved) == [ev.ProblemSolved("engine")]
        await controller.shutdown()

    run(scenario)


def test_a_chat_that_is_gone_is_said_not_raised(tiny_model) -> None:
    async def scenario():
        install(tiny_model)
        controller = make_controller()
        recorder = Recorder(controller)
        await controller.start_up()
        assert controller.send("Short-lived")
        await controller.wait_idle()
        chat = controller.conversation.id
        assert await controller.delete_conversation(chat)
        assert await controller.delete_conversation(chat), "a second delete finds it gone, as asked"
        await controller.open_conversation(chat)
        assert recorder.of(ev.Problem)[-1] == ev.Problem("That chat is no longer there.", "history")
        assert controller.conversation is None
        await controller.shutdown()

    run(scenario)
