"""The model session and the conversations work without the composition root and the window's open chat.

The API server, tools and documents (the next front ends) are built from these owners;
this wires them as such a front end would and drives them on the scripted engine.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from app.core.conversation import Role
from app.core.store.history import HistoryStore
from app.core.paths import data_paths
from app.engine.protocol import ChatMessage, Delta
from app.library.models import ModelLibrary
from app.service import events as ev
from app.service.chats.conversations import Conversations
from app.service.chats.drafts import DraftBook
from app.service.event_bus import EventBus, TaskGroup
from app.service.models.model_session import ModelSession
from app.service.models.model_setup import ModelSetup
from app.service.settings_keeper import SettingsKeeper
from app.service.storage import IN_MEMORY, Storage
from tests.helpers.scripted_answers import Script
from tests.helpers.scripted_engine import ScriptedEngine
from tests.service.conftest import install, run


def test_a_front_end_without_an_open_chat_loads_answers_and_keeps_chats(tiny_model: Path) -> None:
    install(tiny_model)

    async def scenario() -> None:
        bus, tasks = EventBus(), TaskGroup(asyncio.get_running_loop())
        heard: list[ev.Event] = []
        bus.subscribe(heard.append)
        storage = await Storage.open(IN_MEMORY, None)
        keeper = SettingsKeeper(lambda: storage, bus.emit)
        engine = ScriptedEngine()
        engine.scripts.append(Script(text=("Hello", " from", " the", " session"), endless=False))
        library = ModelLibrary(data_paths().models)
        session = ModelSession(engine, ModelSetup(library, bus.emit), bus, tasks, keeper,
                               context_length=lambda: 2048, answers_busy=lambda: False,
                               answer_writing=lambda: False, threads_file=None)
        conversations = Conversations(lambda: storage, bus.emit, keeper,
                                      DraftBook(lambda: storage, bus.emit, tasks.spawn),
                                      lambda: session.chat_defaults_model)
        try:
            [model] = library.list()
            assert await session.load_model(model) and session.state == ev.ModelState.READY
            assert engine.loaded is not None and engine.loaded.context_length == 2048
            assert keeper.settings.default_model == model.id, "the app's model is remembered"

            saved = await conversations.create("From the API", None)
            assert saved.settings == conversations.new_chat_settings()
            await storage.history(HistoryStore.add_message, saved.id, Role.USER, "Hi")
            text = ""
            async for event in session.engine.request([ChatMessage(Role.USER, "Hi")], saved.settings).events():
                if isinstance(event, Delta):
                    text += event.text
            assert text == "Hello from the session"
            assert [c.title for c in await conversations.listing()] == ["From the API"]
            assert await conversations.search("API") == {saved.id}
            assert any(isinstance(e, ev.ConversationChanged) and e.conversation.id == saved.id for e in heard)
        finally:
            await tasks.cancel_all()
            await engine.shutdown()
            await storage.close()

    run(scenario)
