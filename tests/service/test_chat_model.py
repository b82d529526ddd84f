"""A chat's own model: chosen for the open (or the new) chat, loaded when that chat is sent to,
never on opening it, while the app's default model stays the default."""

from __future__ import annotations

import dataclasses

from app.core.conversation import MessageState
from app.core.history import HistoryStore
from app.core.paths import data_paths
from app.library.importer import import_model_file
from app.library.models import ModelLibrary
from app.service import events as ev
from tests.helpers.scripted_answers import written
from tests.helpers.scripted_engine import ScriptedEngine
from tests.helpers.thinking_gguf import ANSWER, THOUGHT
from tests.service.conftest import app_model_id, history, install, run


def _engine(thinking_model) -> ScriptedEngine:
    """The thinker answers as the real scripted GGUF does; the tiny model, endlessly."""
    engine = ScriptedEngine()
    engine.model_scripts[thinking_model.name] = written(ANSWER, THOUGHT)
    return engine


def test_a_chats_own_model_loads_when_it_is_sent_to_and_the_default_stays(started_controller, tiny_model,
                                                                           thinking_model) -> None:
    install(tiny_model)
    thinker = import_model_file(ModelLibrary(data_paths().models), thinking_model)

    async def scenario():
        async with started_controller(engine=_engine(thinking_model), install_model=False) as started:
            controller, recorder = started.controller, started.events
            tiny_id = controller.model.id
            assert controller.conversation_model_id() is None
            # Chosen in the new chat before its first message: kept for when it is saved.
            await controller.set_conversation_model(thinker.id)
            assert controller.conversation_model_id() == thinker.id
            assert recorder.of(ev.ConversationModelChosen)[-1] == ev.ConversationModelChosen(None, thinker.id)
            assert controller.model.id == tiny_id, "choosing loads nothing"
            assert controller.send("Which model are you?")
            await controller.wait_idle()
            own_chat = controller.conversation
            assert own_chat.model == thinker.id
            assert controller.messages[-1].text == ANSWER, "the thinker answered"
            assert controller.messages[-1].thinking == THOUGHT
            assert controller.settings.default_model == tiny_id, "a chat's model is not the app's default"
            # A chat on the default model loads it back when sent to, not when opened.
            controller.new_conversation()
            assert controller.conversation_model_id() is None
            assert controller.send("And you?")
            await controller.wait_idle()
            default_chat = controller.conversation.id
            assert controller.model.id == tiny_id and controller.messages[-1].text != ANSWER
            loads = len([e for e in recorder.of(ev.ModelStateChanged) if e.state == ev.ModelState.LOADING])
            await controller.open_conversation(own_chat.id)
            assert controller.conversation_model_id() == thinker.id
            assert controller.model.id == tiny_id, "opening a chat loads nothing"
            await controller.set_conversation_model(None)  # back to the default: no load needed to answer
            assert controller.send("Default now")
            await controller.wait_idle()
            assert controller.model.id == tiny_id and controller.messages[-1].text != ANSWER
            assert len([e for e in recorder.of(ev.ModelStateChanged) if e.state == ev.ModelState.LOADING]) == loads
            stored = await history(controller, HistoryStore.get_conversation, own_chat.id)
            assert stored.model is None
            assert (await history(controller, HistoryStore.get_conversation, default_chat)).model is None

    run(scenario)


def test_a_waiting_chat_gets_its_own_model_when_its_turn_comes(started_controller, tiny_model,
                                                                thinking_model) -> None:
    install(tiny_model)
    thinker = import_model_file(ModelLibrary(data_paths().models), thinking_model)

    async def scenario():
        async with started_controller(engine=_engine(thinking_model), install_model=False) as started:
            controller, recorder = started.controller, started.events
            system, settings = controller.conversation_settings()
            await controller.set_conversation_settings(system, dataclasses.replace(settings, max_tokens=100_000))
            first = controller.conversation.id
            assert controller.send("Talk for a long time")
            await recorder.until(lambda: recorder.of(ev.TextGrew), what="A's answer")
            controller.new_conversation()
            await controller.set_conversation_model(thinker.id)
            assert controller.send("Thinker, your turn")
            await recorder.until(lambda: len(controller.waiting_ids) == 1, what="B to wait")
            controller.stop(first)
            await controller.wait_idle()
            assert controller.messages[-1].text == ANSWER
            assert controller.model.id == thinker.id and app_model_id(controller) != thinker.id

    run(scenario)


def test_a_chats_model_that_cannot_load_is_said_and_other_chats_still_answer(started_controller, tiny_model,
                                                                             tmp_path) -> None:
    install(tiny_model)
    copy = tmp_path / "damaged later.gguf"
    copy.write_bytes(tiny_model.read_bytes())
    broken = import_model_file(ModelLibrary(data_paths().models), copy)
    damaged = bytearray(broken.path.read_bytes())
    damaged[:64] = b"\0" * 64  # damaged on disk after it was installed (same size: still listed)
    broken.path.write_bytes(bytes(damaged))

    async def scenario():
        async with started_controller(install_model=False) as started:
            controller, recorder = started.controller, started.events
            assert broken.id != app_model_id(controller)
            await controller.set_conversation_model(broken.id)
            assert controller.send("Hello broken")
            await controller.wait_idle()
            problem = recorder.of(ev.Problem)[-1]
            assert problem.kind == "model" and broken.title in problem.text and "Your message is kept" in problem.text
            assert [m.text for m in controller.messages] == ["Hello broken"]
            controller.new_conversation()
            assert controller.send("Hello default")
            await controller.wait_idle()
            assert controller.messages[-1].state == MessageState.COMPLETE

    run(scenario)
