"""Fixtures for controller tests: a ChatController over an isolated home, no Qt anywhere.

`started_controller` starts one on the scripted engine (tests/helpers/scripted_engine.py)
or, when a test passes one, on a real EngineClient. The helpers below it are the one
place where tests reach past the controller's public methods into its parts, so that a
change of those parts is one change here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

import pytest

from app.core.conversation import Message
from app.core.generation import GenerationSettings
from app.core.history import HistoryStore
from app.core.paths import data_paths
from app.core.settings import Settings, SettingsFile
from app.library.importer import import_model_file
from app.library.models import ModelLibrary
from app.service import events as ev
from app.service.models.client import EngineClient
from app.service.controller import ChatController
from app.service.models.engine_handle import EngineHandle
from app.service.models.engine_queue import EngineQueue
from app.service.models.model_session import ModelSession
from tests.helpers.scripted_engine import ScriptedEngine

E = TypeVar("E")
SMALL = GenerationSettings(max_tokens=24, temperature=0.0, context_length=1024)
LONG = GenerationSettings(max_tokens=100_000, temperature=0.0, context_length=1024)


class Recorder:
    """Every event a controller sent, in order, with helpers to wait for one."""

    def __init__(self, controller: ChatController) -> None:
        self.events: list[ev.Event] = []
        controller.subscribe(self.events.append)

    def of(self, kind: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, kind)]

    async def until(self, predicate: Callable[[], Any], timeout: float = 60, what: str = "condition") -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while not predicate():
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"timed out waiting for {what}; events: {self.events[-8:]}")
            await asyncio.sleep(0.01)

    def text_of(self, message_id: int) -> str:
        return "".join(e.delta for e in self.of(ev.TextGrew) if e.message_id == message_id)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "history.sqlite3"


def install(model: Path, generation: GenerationSettings = SMALL) -> None:
    """Put a model in this home's library and make it the default."""
    paths = data_paths().ensure()
    installed = import_model_file(ModelLibrary(paths.models), model)
    SettingsFile(paths.settings_file).save(Settings(default_model=installed.id, generation=generation))


def make_controller(client: EngineHandle | None = None) -> ChatController:
    """A controller over this home; on a real engine unless a test gives another."""
    paths = data_paths().ensure()
    return ChatController(history_path=paths.history_db, settings_path=paths.settings_file,
                          library=ModelLibrary(paths.models), client=client or EngineClient())


def run(scenario: Callable[..., Any], timeout: float = 240) -> Any:
    """Run an async scenario on a fresh event loop, as a front end would."""
    return asyncio.run(asyncio.wait_for(scenario(), timeout))


# --- started_controller -------------------------------------------------------------------


@dataclass
class Started:
    """A controller that started up, every event it sent, and the engine under it."""

    controller: ChatController
    events: Recorder
    engine: Any  # a ScriptedEngine, or the EngineClient a test gave
    _shut: bool = False

    async def shutdown(self) -> None:
        """Shut the controller down now (the fixture does it at the end otherwise)."""
        if not self._shut:
            self._shut = True
            await self.controller.shutdown()


Start = Literal["start_up", "open", None]


class StartController(Protocol):
    def __call__(self, generation: GenerationSettings = SMALL, *, model: Path | None = None,
                 engine: EngineHandle | None = None, install_model: bool = True,
                 start: Start = "start_up") -> AbstractAsyncContextManager[Started]: ...


@pytest.fixture
def started_controller(tiny_model: Path) -> StartController:
    """`async with started_controller() as started:` a controller over this test's home,
    started up (start="open": only opened; None: neither), shut down cleanly at the end.

    generation: the app's settings for new chats. model: installed as the default (the
    tiny model unless given; install_model=False for a second start in the same home).
    engine: a ScriptedEngine unless a test gives one (an EngineClient for the real one).
    After start_up the model must be loaded.
    """

    @asynccontextmanager
    async def begin(generation: GenerationSettings = SMALL, *, model: Path | None = None,
                    engine: EngineHandle | None = None, install_model: bool = True,
                    start: Start = "start_up") -> AsyncIterator[Started]:
        if install_model:
            install(model or tiny_model, generation)
        engine = engine if engine is not None else ScriptedEngine()
        controller = make_controller(engine)
        started = Started(controller, Recorder(controller), engine)
        try:
            if start == "start_up":
                await controller.start_up()
                assert controller.model_state == ev.ModelState.READY, controller.model_detail
            elif start == "open":
                await controller.open()
            yield started
        finally:
            await started.shutdown()
        assert engine.pid is None, "the engine was left running"

    return begin


# --- the controller's parts, reached in one place -------------------------------------------


def writing(controller: ChatController) -> bool:
    """An answer is being written now (not waiting, not loading its model)."""
    return controller.answers.writing


async def history(controller: ChatController, method: Callable[..., E], *args: Any) -> E:
    """One call on the controller's history store, on its writer thread."""
    assert controller.storage is not None
    return await controller.storage.history(method, *args)


async def stored(controller: ChatController, conversation_id: int) -> list[Message]:
    """A chat's messages as the history holds them."""
    return await history(controller, HistoryStore.messages, conversation_id)


def history_in_memory(controller: ChatController) -> bool:
    assert controller.storage is not None
    return controller.storage.in_memory


def session_of(controller: ChatController) -> ModelSession:
    """The model session: the engine, the model in it, and what goes with them."""
    return controller.session


def engine_line(controller: ChatController) -> EngineQueue:
    """The line in which every front end's requests wait for the engine."""
    return controller.session.engine


def engine_of(controller: ChatController) -> Any:
    return controller.session.client


def app_model_id(controller: ChatController) -> str | None:
    """The app's model (the default for new chats), as opposed to a chat's own."""
    app_model = controller.session.app_model
    return app_model.id if app_model is not None else None


def settings_file(controller: ChatController) -> Path:
    assert controller._settings_path is not None
    return controller._settings_path


def set_busy_cores(controller: ChatController, busy: Callable[[], float]) -> None:
    """What the thread advisor hears of the cores other programs keep busy."""
    controller.session.threads._busy = busy


def priority_problem(controller: ChatController) -> str | None:
    return controller.session.pace.problem


def drafted_ids(controller: ChatController) -> set[int]:
    return controller.drafts.drafted_ids


async def drafts_written(controller: ChatController) -> None:
    """Until every draft saved so far is on disk."""
    await controller.drafts.flush()


def library_of(controller: ChatController) -> ModelLibrary:
    return controller.session.setup.library


def give_sight(controller: ChatController, *, loaded: bool = True, problem: str = "") -> None:
    """The model in the engine as one the library paired with a vision projector (the library's
    pairing and the projector's load are other parts' work): `loaded` whether the engine said the
    projector loaded, `problem` its words when not."""
    session = controller.session
    engine = session.client
    assert session.model is not None and engine.loaded is not None
    seeing = replace(session.model, projector=session.model.path.with_name("mmproj.gguf"))
    session.model = seeing
    if session.app_model is not None and session.app_model.id == seeing.id:
        session.app_model = seeing
    engine.loaded = replace(engine.loaded, vision=loaded, vision_problem=problem)  # type: ignore[misc]


def take_sight(controller: ChatController) -> None:
    """The model in the engine as a text-only one again."""
    session = controller.session
    assert session.model is not None
    session.model = session.app_model = replace(session.model, projector=None)
    session.client.loaded = replace(session.client.loaded, vision=False)  # type: ignore[misc, type-var]
