"""Problems say what they are about, and an engine failure is taken back (ProblemSolved) once a
new engine has loaded the model, so a banner about it does not stay up for ever."""

from __future__ import annotations

import dataclasses

from app.service import events as ev
from tests.service.conftest import LONG, SMALL, run


def test_an_engine_dying_mid_answer_is_an_engine_problem_solved_by_the_next_engine(started_service) -> None:
    async def scenario():
        async with started_service(LONG) as started:
            doors, recorder = started.doors, started.events
            assert doors.chat.send("Keep talking")
            await recorder.until(lambda: recorder.of(ev.TextGrew), what="the answer")
            started.engine.die()
            await doors.chat.wait_idle()
            problem = recorder.of(ev.Problem)[-1]
            assert problem.kind == "engine" and "stopped unexpectedly" in problem.text
            assert recorder.of(ev.ProblemSolved) == []
            await doors.chat.set_conversation_settings("", dataclasses.replace(SMALL, max_tokens=4))
            assert doors.chat.send("Back?")
            await doors.chat.wait_idle()
            assert recorder.of(ev.ProblemSolved) == [ev.ProblemSolved("engine")]
            solved_at = recorder.events.index(ev.ProblemSolved("engine"))
            ready_at = max(i for i, e in enumerate(recorder.events[:solved_at])
                           if isinstance(e, ev.ModelStateChanged) and e.state == ev.ModelState.READY)
            assert ready_at == solved_at - 1, "solved once the new engine has the model"

    run(scenario)


def test_an_engine_dying_between_answers_is_solved_when_the_next_message_loads_it(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            doors, recorder = started.doors, started.events
            started.engine.die()
            await recorder.until(lambda: doors.model.model_state == ev.ModelState.FAILED, what="the report")
            assert doors.chat.send("Still there?")
            await doors.chat.wait_idle()
            assert recorder.of(ev.ProblemSolved) == [ev.ProblemSolved("engine")]
            # A second, ordinary load says nothing more.
            await doors.model.load_model(doors.model.model)
            assert recorder.of(ev.ProblemSolved) == [ev.ProblemSolved("engine")]

    run(scenario)


def test_a_chat_that_is_gone_is_said_not_raised(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            doors, recorder = started.doors, started.events
            assert doors.chat.send("Short-lived")
            await doors.chat.wait_idle()
            chat = doors.chat.conversation.id
            assert await doors.chat.delete_conversation(chat)
            assert await doors.chat.delete_conversation(chat), "a second delete finds it gone, as asked"
            await doors.chat.open_conversation(chat)
            assert recorder.of(ev.Problem)[-1] == ev.Problem("That chat is no longer there.", "history")
            assert doors.chat.conversation is None

    run(scenario)
