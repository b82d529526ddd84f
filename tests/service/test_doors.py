"""Front ends reach the service through doors: a new front end is the root, the doors it needs and a few lines,
and no front end reaches an owner through the root."""

from __future__ import annotations

import ast
from pathlib import Path

from app.core.paths import data_paths
from app.library.models import ModelLibrary
from app.service import events as ev
from app.service.doors.chat import ChatDoor
from app.service.doors.models import ModelDoor
from app.service.root import Service
from app.service.storage import IN_MEMORY
from tests.helpers.scripted_answers import written
from tests.helpers.scripted_engine import ScriptedEngine
from tests.service.conftest import install, run

ROOT = Path(__file__).resolve().parents[2]
# What a front end may do with the root itself: start it, stop it, hear it, run work on its loop, and hand
# the API server its door. Everything else goes through a door (app/service/doors/).
ROOT_FOR_FRONT_ENDS = {"open", "start_up", "shutdown", "subscribe", "spawn", "api"}


def root_uses(source: str) -> set[str]:
    """The attributes read on a name `service` (how every front end names the root it holds)."""
    return {node.attr for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "service"}


def test_a_front_end_is_the_root_the_doors_it_needs_and_a_few_lines(tiny_model: Path) -> None:
    """The files to touch for a new front end: it builds a Service (app/service/root.py), makes the doors it
    needs (app/service/doors/), hears the events, opens and shuts the service down. This one answers one
    question in a history kept in memory, as `kestrel chat` does, and uses no owner."""
    install(tiny_model)
    engine = ScriptedEngine()
    engine.scripts.append(written("Kestrels hover."))

    async def tiny_front_end(question: str) -> tuple[str, list[str]]:
        service = Service(history_path=IN_MEMORY, settings_path=None, library=ModelLibrary(data_paths().models),
                          client=engine)
        chat, model = ChatDoor(service), ModelDoor(service)
        heard: list[str] = []
        service.subscribe(lambda event: heard.append(event.delta) if isinstance(event, ev.TextGrew) else None)
        try:
            await service.open()
            [installed] = ModelLibrary(data_paths().models).list()
            assert await model.load_model(installed), model.model_detail
            assert chat.send(question)
            await chat.wait_idle()
            return chat.messages[-1].text, heard
        finally:
            await service.shutdown()

    answer, streamed = run(lambda: tiny_front_end("What do kestrels do?"))
    assert answer == "Kestrels hover." == "".join(streamed)
    assert engine.requests[-1].messages[-1].content == "What do kestrels do?"
    assert engine.pid is None, "shutdown() ended the engine"


def test_no_front_end_reaches_an_owner_through_the_root() -> None:
    front_ends = [*sorted((ROOT / "app" / "ui").rglob("*.py")), *sorted((ROOT / "app" / "cli").rglob("*.py")),
                  ROOT / "app" / "__main__.py"]
    reached = {f"{path.relative_to(ROOT)}: service.{name}"
               for path in front_ends for name in root_uses(path.read_text(encoding="utf-8")) - ROOT_FOR_FRONT_ENDS}
    assert not reached, "give the front end a door (app/service/doors/) instead: " + ", ".join(sorted(reached))
    assert root_uses("service.session.model") == {"session"}  # what a reach through the root looks like, caught


def test_the_doors_hand_over_the_owners_own_calls() -> None:
    """A door passes no call on: Send from the window or the CLI is Answering's own send, one room."""
    async def built() -> None:
        service = Service(history_path=IN_MEMORY, settings_path=None, library=ModelLibrary(data_paths().models),
                          client=ScriptedEngine())
        chat = ChatDoor(service)
        assert chat.send == service.answers.send and chat.stop == service.answers.stop
        assert chat.open_conversation == service.answers.show
        assert chat.set_conversation_model == service.chat.choose_model

    run(built)
