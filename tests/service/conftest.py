"""Fixtures for service tests: the composition root (Service) over an isolated home, no Qt anywhere.

`started_service` starts one on the scripted engine (tests/helpers/scripted_engine.py)
or, when a test passes one, on a real EngineClient, and gives the doors the window gets
(WindowDoors): tests drive them as a front end does. The helpers below it are the one
place where tests reach past the doors into the owners, so that a change of those parts
is one change here.
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
from app.core.store.history import HistoryStore
from app.core.paths import data_paths
from app.core.settings import Settings, SettingsFile
from app.library.importer import import_model_file
from app.library.models import ModelLibrary
from app.service import events as ev
from app.service.doors.window import WindowDoors
from app.service.models.client import EngineClient
from app.service.models.engine_handle import EngineHandle
from app.service.models.engine_queue import EngineQueue
from app.service.models.model_session import ModelSession
from app.service.root import Service
from tests.helpers.scripted_engine import ScriptedEngine

E = TypeVar("E")
SMALL = GenerationSettings(max_tokens=24, temperature=0.0, context_length=1024)
LONG = GenerationSettings(max_tokens=100_000, temperature=0.0, context_length=1024)


class Recorder:
    """Every event a service sent, in order, with helpers to wait for one."""

    def __init__(self, service: Service) -> None:
        self.events: list[ev.Event] = []
        service.subscribe(self.events.append)

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


def make_service(client: EngineHandle | None = None, *, calibrate: bool = False) -> Service:
    """The service over this home; on a real engine unless a test gives another. calibrate: measure the
    loaded model's speed in the background as the window does (off here, so that no test's engine requests
    change under it)."""
    paths = data_paths().ensure()
    return Service(history_path=paths.history_db, settings_path=paths.settings_file,
                   library=ModelLibrary(paths.models), client=client or EngineClient(), calibrate=calibrate)


def run(scenario: Callable[..., Any], timeout: float = 240) -> Any:
    """Run an async scenario on a fresh event loop, as a front end would."""
    return asyncio.run(asyncio.wait_for(scenario(), timeout))


# --- started_service ----------------------------------------------------------------------


@dataclass
class Started:
    """A service that started up, the window's doors into it, every event it sent, and the engine under it."""

    service: Service
    doors: WindowDoors
    events: Recorder
    engine: Any  # a ScriptedEngine, or the EngineClient a test gave
    _shut: bool = False

    async def shutdown(self) -> None:
        """Shut the service down now (the fixture does it at the end otherwise)."""
        if not self._shut:
            self._shut = True
            await self.service.shutdown()


Start = Literal["start_up", "open", None]


class StartService(Protocol):
    def __call__(self, generation: GenerationSettings = SMALL, *, model: Path | None = None,
                 engine: EngineHandle | None = None, install_model: bool = True,
                 start: Start = "start_up", calibrate: bool = False) -> AbstractAsyncContextManager[Started]: ...


@pytest.fixture
def started_service(tiny_model: Path) -> StartService:
    """`async with started_service() as started:` a service over this test's home,
    started up (start="open": only opened; None: neither), shut down cleanly at the end.

    generation: the app's settings for new chats. model: installed as the default (the
    tiny model unless given; install_model=False for a second start in the same home).
    engine: a ScriptedEngine unless a test gives one (an EngineClient for the real one).
    calibrate: the background speed calibration on (make_service). After start_up the model must be loaded.
    """

    @asynccontextmanager
    async def begin(generation: GenerationSettings = SMALL, *, model: Path | None = None,
                    engine: EngineHandle | None = None, install_model: bool = True,
                    start: Start = "start_up", calibrate: bool = False) -> AsyncIterator[Started]:
        if install_model:
            install(model or tiny_model, generation)
        engine = engine if engine is not None else ScriptedEngine()
        service = make_service(engine, calibrate=calibrate)
        started = Started(service, WindowDoors.of(service), Recorder(service), engine)
        try:
            if start == "start_up":
                await service.start_up()
                assert service.session.state == ev.ModelState.READY, service.session.detail
            elif start == "open":
                await service.open()
            yield started
        finally:
            await started.shutdown()
        assert engine.pid is None, "the engine was left running"

    return begin


# --- the service's owners, reached in one place ---------------------------------------------


def writing(service: Service) -> bool:
    """An answer is being written now (not waiting, not loading its model)."""
    return service.answers.writing


async def history(service: Service, method: Callable[..., E], *args: Any) -> E:
    """One call on the service's history store, on its writer thread."""
    assert service.storage is not None
    return await service.storage.history(method, *args)


async def stored(service: Service, conversation_id: int) -> list[Message]:
    """A chat's messages as the history holds them."""
    return await history(service, HistoryStore.messages, conversation_id)


def history_in_memory(service: Service) -> bool:
    assert service.storage is not None
    return service.storage.in_memory


def session_of(service: Service) -> ModelSession:
    """The model session: the engine, the model in it, and what goes with them."""
    return service.session


def engine_line(service: Service) -> EngineQueue:
    """The line in which every front end's requests wait for the engine."""
    return service.session.engine


def engine_of(service: Service) -> Any:
    return service.session.client


def app_model_id(service: Service) -> str | None:
    """The app's model (the default for new chats), as opposed to a chat's own."""
    app_model = service.session.app_model
    return app_model.id if app_model is not None else None


def settings_file(service: Service) -> Path:
    assert service._settings_path is not None
    return service._settings_path


def set_busy_cores(service: Service, busy: Callable[[], float]) -> None:
    """What the thread advisor hears of the cores other programs keep busy."""
    service.session.threads._busy = busy


def priority_problem(service: Service) -> str | None:
    return service.session.pace.problem


def drafted_ids(service: Service) -> set[int]:
    return service.drafts.drafted_ids


async def drafts_written(service: Service) -> None:
    """Until every draft saved so far is on disk."""
    await service.drafts.flush()


def library_of(service: Service) -> ModelLibrary:
    return service.session.setup.library


def give_sight(service: Service, *, loaded: bool = True, problem: str = "") -> None:
    """The model in the engine as one the library paired with a vision projector (the library's
    pairing and the projector's load are other parts' work): `loaded` whether the engine said the
    projector loaded, `problem` its words when not."""
    session = service.session
    engine = session.client
    assert session.model is not None and engine.loaded is not None
    seeing = replace(session.model, projector=session.model.path.with_name("mmproj.gguf"))
    session.model = seeing
    if session.app_model is not None and session.app_model.id == seeing.id:
        session.app_model = seeing
    engine.loaded = replace(engine.loaded, vision=loaded, vision_problem=problem)  # type: ignore[misc]


def take_sight(service: Service) -> None:
    """The model in the engine as a text-only one again."""
    session = service.session
    assert session.model is not None
    session.model = session.app_model = replace(session.model, projector=None)
    session.client.loaded = replace(session.client.loaded, vision=False)  # type: ignore[misc, type-var]
