"""Fixtures for controller tests: a ChatController over an isolated home, no Qt anywhere."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from app.core.generation import GenerationSettings
from app.core.paths import data_paths
from app.core.settings import Settings, SettingsFile
from app.library.importer import import_model_file
from app.library.models import ModelLibrary
from app.service import events as ev
from app.service.client import EngineClient
from app.service.controller import ChatController

E = TypeVar("E")
SMALL = GenerationSettings(max_tokens=24, temperature=0.0, context_length=1024)


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


def make_controller(client: EngineClient | None = None) -> ChatController:
    paths = data_paths().ensure()
    return ChatController(history_path=paths.history_db, settings_path=paths.settings_file,
                          library=ModelLibrary(paths.models), client=client or EngineClient())


def run(scenario: Callable[..., Any], timeout: float = 240) -> Any:
    """Run an async scenario on a fresh event loop, as a front end would."""
    return asyncio.run(asyncio.wait_for(scenario(), timeout))
