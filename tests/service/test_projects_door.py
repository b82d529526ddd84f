"""The projects door over a started service: a project's new chat is saved with all of it and its first answer is
asked with the project's instructions as the system message; moving, removing and importing say the chats changed;
an edit shapes new chats only; refusals come out as ProjectRefused and ProjectFileError with words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.core.conversation import Role
from app.core.project_export import ProjectFileError
from app.core.projects import ProjectRefused
from app.core.store.projects import ProjectChanges
from app.engine import protocol as p
from app.service import events as ev
from app.service.doors.projects import ProjectsDoor
from tests.service.conftest import run

INSTRUCTIONS = "Always answer in French.<|im_start|>"


def test_a_projects_new_chat_is_answered_with_its_instructions(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            door = ProjectsDoor(started.service)
            project = await door.add("Français", INSTRUCTIONS, tools=(), memory=False)
            chat = await door.start_chat(project.id)
            assert started.events.of(ev.ConversationChanged)[-1].conversation == chat
            assert (chat.project_id, chat.system_prompt, chat.memory) == (project.id, INSTRUCTIONS, False)
            await started.doors.chat.open_conversation(chat.id)
            assert started.doors.chat.conversation == chat
            assert started.doors.chat.send("What is the capital of Italy?")
            await started.doors.chat.wait_idle()
            [asked] = [r for r in started.engine.requests if isinstance(r, p.Generate)]
            assert asked.messages[0].role == Role.SYSTEM and asked.messages[0].content.startswith(INSTRUCTIONS)
            assert [c.id for c in await door.chats(project.id)] == [chat.id]

    run(scenario)


def test_moving_editing_and_removing_say_what_changed(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            door, events = ProjectsDoor(started.service), started.events
            first, second = await door.add("First", "One."), await door.add("Second")
            chat = await door.start_chat(first.id)
            moved = await door.move(chat.id, second.id)
            said = events.of(ev.ConversationChanged)[-1]
            assert said.conversation == moved and moved.project_id == second.id and not said.to_top
            edited = await door.edit(first.id, ProjectChanges(instructions="Two."))
            assert edited.instructions == "Two." and (await door.start_chat(first.id)).system_prompt == "Two."
            assert moved.system_prompt == "One.", "a chat keeps what it started with"
            assert await door.remove(second.id) == [chat.id]
            assert events.of(ev.ConversationChanged)[-1].conversation.project_id is None
            assert [project.name for project in await door.listing()] == ["First"]
            with pytest.raises(ProjectRefused, match="already a project"):
                await door.add("first")
            with pytest.raises(KeyError):
                await door.move(chat.id, second.id)

    run(scenario, timeout=120)


def test_a_project_file_round_trip_and_a_hostile_one(started_service, tmp_path: Path) -> None:
    async def scenario():
        async with started_service() as started:
            door = ProjectsDoor(started.service)
            project = await door.add("Trip", INSTRUCTIONS)
            chat = await door.start_chat(project.id)
            await started.doors.chat.open_conversation(chat.id)
            assert started.doors.chat.send("Plan a day in Rome")
            await started.doors.chat.wait_idle()
            path = tmp_path / "trip.kestrel-project"
            assert await door.export(project.id, path) == 1
            with pytest.raises(ProjectFileError, match="already exists"):
                await door.export(project.id, path)
            imported = await door.import_file(path)
            assert imported.project.name == "Trip (2)" and imported.project.instructions == INSTRUCTIONS
            [copy] = await door.chats(imported.project.id)
            assert started.events.of(ev.ConversationChanged)[-1].conversation == copy
            assert copy.system_prompt == INSTRUCTIONS and copy.id == imported.chat_ids[0]
            data = json.loads(path.read_text(encoding="utf-8"))
            data["project"]["instructions"] = "x" * 9_000
            path.write_text(json.dumps(data), encoding="utf-8")
            with pytest.raises(ProjectFileError, match="at most 8,000"):
                await door.import_file(path)
            assert len(await door.listing()) == 2, "a refused file adds nothing"

    run(scenario, timeout=120)
