"""A chat's own model: chosen for the open (or the new) chat, loaded when that chat is sent to,
never on opening it, while the app's default model stays the default."""

from __future__ import annotations

import dataclasses

from app.core.conversation import MessageState
from app.core.store.history import HistoryStore
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


def test_a_chats_own_model_loads_when_it_is_sent_to_and_the_default_stays(started_service, tiny_model,
                                                                           thinking_model) -> None:
    install(tiny_model)
    thinker = import_model_file(ModelLibrary(data_paths().models), thinking_model)

    async def scenario():
        async with started_service(engine=_engine(thinking_model), install_model=False) as started:
            service, doors, recorder = started.service, started.doors, started.events
            tiny_id = doors.model.model.id
            assert doors.chat.conversation_model_id() is None
            # Chosen in the new chat before its first message: kept for when it is saved.
            await doors.chat.set_conversation_model(thinker.id)
            assert doors.chat.conversation_model_id() == thinker.id
            assert recorder.of(ev.ConversationModelChosen)[-1] == ev.ConversationModelChosen(None, thinker.id)
            assert doors.model.model.id == tiny_id, "choosing loads nothing"
            assert doors.chat.send("Which model are you?")
            await doors.chat.wait_idle()
            own_chat = doors.chat.conversation
            assert own_chat.model == thinker.id
            assert doors.chat.messages[-1].text == ANSWER, "the thinker answered"
            assert doors.chat.messages[-1].thinking == THOUGHT
            assert doors.settings.settings.default_model == tiny_id, "a chat's model is not the app's default"
            # A chat on the default model loads it back when sent to, not when opened.
            doors.chat.new_conversation()
            assert doors.chat.conversation_model_id() is None
            assert doors.chat.send("And you?")
            await doors.chat.wait_idle()
            default_chat = doors.chat.conversation.id
            assert doors.model.model.id == tiny_id and doors.chat.messages[-1].text != ANSWER
            loads = len([e for e in recorder.of(ev.ModelStateChanged) if e.state == ev.ModelState.LOADING])
            await doors.chat.open_conversation(own_chat.id)
            assert doors.chat.conversation_model_id() == thinker.id
            assert doors.model.model.id == tiny_id, "opening a chat loads nothing"
            await doors.chat.set_conversation_model(None)  # back to the default: no load needed to answer
            assert doors.chat.send("Default now")
            await doors.chat.wait_idle()
            assert doors.model.model.id == tiny_id and doors.chat.messages[-1].text != ANSWER
            assert len([e for e in recorder.of(ev.ModelStateChanged) if e.state == ev.ModelState.LOADING]) == loads
            stored = await history(service, HistoryStore.get_conversation, own_chat.id)
            assert stored.model is None
            assert (await history(service, HistoryStore.get_conversation, default_chat)).model is None

    run(scenario)


def test_a_waiting_chat_gets_its_own_model_when_its_turn_comes(started_service, tiny_model,
                                                                thinking_model) -> None:
    install(tiny_model)
    thinker = import_model_file(ModelLibrary(data_paths().models), thinking_model)

    async def scenario():
        async with started_service(engine=_engine(thinking_model), install_model=False) as started:
            service, doors, recorder = started.service, started.doors, started.events
            system, settings = doors.chat.conversation_settings()
            await doors.chat.set_conversation_settings(system, dataclasses.replace(settings, max_tokens=100_000))
            first = doors.chat.conversation.id
            assert doors.chat.send("Talk for a long time")
            await recorder.until(lambda: recorder.of(ev.TextGrew), what="A's answer")
            doors.chat.new_conversation()
            await doors.chat.set_conversation_model(thinker.id)
            assert doors.chat.send("Thinker, your turn")
            await recorder.until(lambda: len(doors.chat.waiting_ids) == 1, what="B to wait")
            doors.chat.stop(first)
            await doors.chat.wait_idle()
            assert doors.chat.messages[-1].text == ANSWER
            assert doors.model.model.id == thinker.id and app_model_id(service) != thinker.id

    run(scenario)


def test_a_chats_model_that_cannot_load_is_said_and_other_chats_still_answer(started_service, tiny_model,
                                                                             tmp_path) -> None:
    install(tiny_model)
    copy = tmp_path / "damaged later.gguf"
    copy.write_bytes(tiny_model.read_bytes())
    broken = import_model_file(ModelLibrary(data_paths().models), copy)
    damaged = bytearray(broken.path.read_bytes())
    damaged[:64] = b"\0" * 64  # damaged on disk after it was installed (same size: still listed)
    broken.path.write_bytes(bytes(damaged))

    async def scenario():
        async with started_service(install_model=False) as started:
            service, doors, recorder = started.service, started.doors, started.events
            assert broken.id != app_model_id(service)
            await doors.chat.set_conversation_model(broken.id)
            assert doors.chat.send("Hello broken")
            await doors.chat.wait_idle()
            problem = recorder.of(ev.Problem)[-1]
            assert problem.kind == "model" and broken.title in problem.text and "Your message is kept" in problem.text
            assert [m.text for m in doors.chat.messages] == ["Hello broken"]
            doors.chat.new_conversation()
            assert doors.chat.send("Hello default")
            await doors.chat.wait_idle()
            assert doors.chat.messages[-1].state == MessageState.COMPLETE

    run(scenario)
