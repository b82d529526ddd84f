"""Export and import through the chat files door: a chat written to Markdown or JSON, a JSON export
read back as a new chat, and files that cannot be written or read said in plain words."""

from __future__ import annotations

import json
import os
import stat

import pytest

from app.core.attachments import AttachedImage
from app.core.chat_export import MAX_BYTES
from app.core.store.history import HistoryStore
from app.service import events as ev
from app.service.chats.chat_files import ChatFiles, ExportOutcome, Imported
from tests.helpers.images import image_bytes
from tests.service.conftest import give_sight, history, run


async def _chat_with_answers(started) -> None:
    for text in ("Tell me about kestrels", "And falcons?"):
        assert started.doors.chat.send(text)
        await started.doors.chat.wait_idle()


def test_a_json_export_imports_back_as_a_new_chat_with_the_same_messages(started_service, tmp_path) -> None:
    async def scenario():
        async with started_service() as started:
            service, doors, recorder = started.service, started.doors, started.events
            await _chat_with_answers(started)
            original = doors.chat.conversation
            path = tmp_path / "exported chat ü.json"
            assert await doors.files.export_conversation(original.id, path, "json") is ExportOutcome.WRITTEN
            assert json.loads(path.read_text(encoding="utf-8"))["format"] == "kestrel-chat"
            new_id = await doors.files.import_conversation(path)
            assert new_id is not None and new_id != original.id
            assert recorder.of(ev.ConversationChanged)[-1].conversation.id == new_id
            before = await history(service, HistoryStore.messages, original.id)
            after = await history(service, HistoryStore.messages, new_id)
            assert [(m.role, m.text, m.thinking, m.stats, m.state) for m in after] == \
                [(m.role, m.text, m.thinking, m.stats, m.state) for m in before]
            imported = await history(service, HistoryStore.get_conversation, new_id)
            assert (imported.title, imported.settings) == (original.title, original.settings)
            found = await doors.history.search("falcons")
            assert found == {original.id, new_id}, "an imported chat is searchable"

    run(scenario)


def test_markdown_export_holds_the_chat(started_service, tmp_path) -> None:
    async def scenario():
        async with started_service() as started:
            doors = started.doors
            await _chat_with_answers(started)
            path = tmp_path / "chat.md"
            assert await doors.files.export_conversation(doors.chat.conversation.id, path,
                                                         "markdown") is ExportOutcome.WRITTEN
            text = path.read_text(encoding="utf-8")
            assert text.startswith("# Tell me about kestrels") and text.count("## You") == 2
            assert doors.chat.messages[-1].text.strip()[:20] in text

    run(scenario)


@pytest.mark.skipif(os.name == "nt" or os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_folder_that_refuses_the_file_is_said_naming_it(started_service, tmp_path) -> None:
    async def scenario():
        async with started_service() as started:
            doors, recorder = started.doors, started.events
            await _chat_with_answers(started)
            folder = tmp_path / "locked"
            folder.mkdir()
            folder.chmod(0o500)
            try:
                assert await doors.files.export_conversation(doors.chat.conversation.id, folder / "c.md",
                                                             "markdown") is not ExportOutcome.WRITTEN
            finally:
                folder.chmod(0o700)
            problem = recorder.of(ev.Problem)[-1]
            assert problem.kind == "disk" and str(folder / "c.md") in problem.text

    run(scenario)


def test_an_export_where_no_folder_can_be_is_said_naming_the_file(started_service, tmp_path) -> None:
    async def scenario():
        async with started_service() as started:
            doors, recorder = started.doors, started.events
            await _chat_with_answers(started)
            (tmp_path / "a file").write_text("not a folder")
            target = tmp_path / "a file" / "chat.json"
            assert await doors.files.export_conversation(doors.chat.conversation.id, target,
                                                         "json") is not ExportOutcome.WRITTEN
            problem = recorder.of(ev.Problem)[-1]
            assert problem.kind == "disk" and str(target) in problem.text and "Choose another folder" in problem.text

    run(scenario)


def test_hostile_and_huge_files_are_refused_and_nothing_is_added(started_service, tmp_path) -> None:
    async def scenario():
        async with started_service() as started:
            service, doors, recorder = started.service, started.doors, started.events
            await _chat_with_answers(started)
            before = await history(service, HistoryStore.list_conversations)
            hostile = tmp_path / "hostile.json"
            hostile.write_text(json.dumps({"format": "kestrel-chat", "version": 1,
                                           "messages": [{"role": "user", "text": "ok"}, {"role": "admin", "text": 1}]}))
            assert await doors.files.import_conversation(hostile) is None
            assert str(hostile) in recorder.of(ev.Problem)[-1].text and "message 2" in recorder.of(ev.Problem)[-1].text
            huge = tmp_path / "huge.json"
            with huge.open("wb") as file:
                file.truncate(MAX_BYTES + 1)
            assert await doors.files.import_conversation(huge) is None
            assert "too big" in recorder.of(ev.Problem)[-1].text
            assert await history(service, HistoryStore.list_conversations) == before

    run(scenario)


def test_a_file_there_is_replaced_only_when_asked_and_keeps_its_mode(started_service, tmp_path) -> None:
    async def scenario():
        async with started_service() as started:
            doors, recorder = started.doors, started.events
            await _chat_with_answers(started)
            chat = doors.chat.conversation.id
            target = tmp_path / "notes.md"
            target.write_text("my notes")
            target.chmod(0o640)
            assert await doors.files.export_conversation(chat, target, "markdown") is not ExportOutcome.WRITTEN
            problem = recorder.of(ev.Problem)[-1]
            assert problem.kind == "disk" and f"{target} already exists" in problem.text
            assert target.read_text() == "my notes"
            assert await doors.files.export_conversation(chat, target, "markdown",
                                                         replace=True) is ExportOutcome.WRITTEN
            assert target.read_text(encoding="utf-8").startswith("# Tell me about kestrels")
            if os.name != "nt":
                assert stat.S_IMODE(target.stat().st_mode) == 0o640

    run(scenario)


def test_a_link_a_pipe_and_a_missing_folder_are_refused_in_words(started_service, tmp_path) -> None:
    async def scenario():
        async with started_service() as started:
            doors, recorder = started.doors, started.events
            await _chat_with_answers(started)
            chat = doors.chat.conversation.id
            other = tmp_path / "other.txt"
            other.write_text("keep")
            (tmp_path / "link.md").symlink_to(other)
            targets = [(tmp_path / "link.md", "is a link to another file"),
                       (tmp_path / "gone" / "chat.md", f"the folder {tmp_path / 'gone'} does not exist")]
            if os.name != "nt":
                os.mkfifo(tmp_path / "pipe.md")
                targets.append((tmp_path / "pipe.md", "is a named pipe, not a file"))
            for target, words in targets:
                assert await doors.files.export_conversation(chat, target, "json",
                                                             replace=True) is not ExportOutcome.WRITTEN
                problem = recorder.of(ev.Problem)[-1]
                assert problem.kind == "disk" and str(target) in problem.text and words in problem.text, problem
            assert other.read_text() == "keep" and not (tmp_path / "gone").exists()

    run(scenario)


def test_imported_images_are_checked_and_those_refused_are_left_out_in_words(started_service, tmp_path) -> None:
    # An export's images were only bounded and their first bytes looked at: one that claims other
    # sides than it has, and two that start like a PNG and a JPEG and are not.
    claims = AttachedImage("claims.png", "image/png", 900, 700, image_bytes(30, 20), "")
    fake_png = AttachedImage("fake.png", "image/png", 10, 10, b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "")
    fake_jpeg = AttachedImage("fake.jpg", "image/jpeg", 10, 10, b"\xff\xd8\xff" + b"junk" * 16, "")

    async def scenario():
        async with started_service() as started:
            service, doors, recorder = started.service, started.doors, started.events
            give_sight(service)
            assert doors.chat.send("What are these?", images=[claims, fake_png, fake_jpeg])
            await doors.chat.wait_idle()
            path = tmp_path / "chat.json"
            assert await doors.files.export_conversation(doors.chat.conversation.id, path,
                                                         "json") is ExportOutcome.WRITTEN
            imported = await service.files.import_file(path)
            assert imported.chat_id is not None
            user = (await history(service, HistoryStore.messages, imported.chat_id))[0]
            [image] = user.images
            assert (image.name, image.width, image.height) == ("claims.png", 30, 20)
            assert imported.left_out.startswith("2 images could not be used and were left out: fake.png in message "
                                                "1 (it could not be read")
            assert "; fake.jpg in message 1 (" in imported.left_out
            [said] = [p.text for p in recorder.of(ev.Problem)]
            assert said.startswith(f"The chat in {path} was imported as ") and imported.left_out in said

    run(scenario)


def test_an_import_whose_image_check_cannot_start_is_refused_in_words(started_service, tmp_path) -> None:
    def cannot_start(items):
        raise RuntimeError("the image check process did not start")  # as LimitedChild says it

    async def scenario():
        async with started_service() as started:
            service, doors, recorder = started.service, started.doors, started.events
            give_sight(service)
            assert doors.chat.send("And this?", images=[AttachedImage("a.png", "image/png", 8, 8, image_bytes(8, 8),
                                                                      "")])
            await doors.chat.wait_idle()
            path = tmp_path / "chat.json"
            assert await doors.files.export_conversation(doors.chat.conversation.id, path,
                                                         "json") is ExportOutcome.WRITTEN
            chats = await service.conversations.read_all()
            files = ChatFiles(lambda: service.storage, recorder.events.append, check=cannot_start)
            assert await files.import_file(path) == Imported(None)
            assert recorder.of(ev.Problem)[-1].text == (
                f"The chat in {path} was not imported: Kestrel could not start its image check: the image check "
                "process did not start. Try again; if it goes on, close other programs to free memory.")
            assert await service.conversations.read_all() == chats

    run(scenario)
