"""Files attached in a chat and its collections, through the chat and attach doors on the scripted engine:
kept in the history."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest

from app.core.attachments import AttachedFile, AttachedSection
from app.core.conversation import Role
from app.documents.collections import DocumentsError, Hit
from app.service import events as ev
from app.service.documents.attached_files import AttachmentsUnreadable, read_attachments
from app.service.documents.document_context import MATERIAL_INTRO
from tests.service.conftest import run, stored

FACT = "The kestrel club meets on Thursdays at 7 in room 12."
QUESTION = "When does the kestrel club meet?"
CLUB = AttachedFile("/home/ann/club.txt", "text", 60, (AttachedSection(f"Members' notes.\n\n{FACT}"),))
ROOMS = AttachedFile("/home/ann/rooms.md", "markdown", 30, (AttachedSection("Room 12 is upstairs.", None, "Rooms"),))


def user_turns(engine, request: int = -1) -> list[str]:
    return [m.content for m in engine.requests[request].messages if m.role == Role.USER]


def test_files_sent_with_a_message_are_kept_with_it_and_framed_the_same_for_the_next_question(
        started_service) -> None:
    async def scenario():
        async with started_service() as started:
            service, doors, engine = started.service, started.doors, started.engine
            assert doors.chat.send(QUESTION, [CLUB])
            await doors.chat.wait_idle()
            first = user_turns(engine)[0]
            assert first.startswith(MATERIAL_INTRO) and FACT in first and first.endswith(f"Question: {QUESTION}")
            conversation_id = doors.chat.conversation.id
            user, answer = await stored(service, conversation_id)
            assert (user.text, user.attachments) == (QUESTION, (CLUB,)), "the history keeps what the user typed"
            assert [(s.number, s.path) for s in answer.sources] == [(1, CLUB.path)]
            finished = started.events.of(ev.AnswerFinished)[-1].message
            assert finished.sources == answer.sources and doors.chat.messages[-1].sources == answer.sources
            assert doors.chat.send("Which room?", [ROOMS])
            await doors.chat.wait_idle()
            turns = user_turns(engine)
            assert turns[0] == first, "the first turn is given as before: its saved state is reused"
            assert "[2] rooms.md\n" in turns[1] and "[1] club.txt" not in turns[1]
            *_, last_answer = await stored(service, conversation_id)
            assert [s.number for s in last_answer.sources] == [1, 2]

    run(scenario)


def test_files_alone_ask_for_a_summary_which_the_message_keeps(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            service, doors = started.service, started.doors
            assert not doors.chat.send("  ")
            assert doors.chat.send("", [CLUB, ROOMS])
            await doors.chat.wait_idle()
            user, _ = await stored(service, doors.chat.conversation.id)
            assert (user.text, user.attachments) == ("Summarise the attached files.", (CLUB, ROOMS))
            assert doors.chat.conversation.title == "Summarise the attached files."

    run(scenario)


def test_attachments_survive_a_restart_and_an_edit_and_a_regenerate(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            assert started.doors.chat.send(QUESTION, [CLUB])
            await started.doors.chat.wait_idle()
            conversation_id = started.doors.chat.conversation.id
        async with started_service(install_model=False) as again:
            service, doors, engine = again.service, again.doors, again.engine
            await doors.chat.open_conversation(conversation_id)
            assert doors.chat.messages[0].attachments == (CLUB,) and doors.chat.messages[1].sources
            assert doors.chat.regenerate()
            await doors.chat.wait_idle()
            assert FACT in user_turns(engine)[0], "a new service answers from the kept file"
            assert doors.chat.edit_and_resend(doors.chat.messages[0].id, "What day?")
            await doors.chat.wait_idle()
            user, answer = await stored(service, conversation_id)
            assert (user.text, user.attachments) == ("What day?", (CLUB,))
            assert FACT in user_turns(engine)[0] and user_turns(engine)[0].endswith("Question: What day?")
            assert [s.path for s in answer.sources] == [CLUB.path]

    run(scenario)


class Collections:
    """A search over named collections, as DocumentsService.search gives it; `gone` ones raise."""

    def __init__(self, gone: Sequence[str] = ()) -> None:
        self.gone, self.asked = set(gone), []

    async def search(self, question: str, names: Sequence[str], limit: int) -> list[Hit]:
        self.asked.append((question, tuple(names)))
        if missing := [name for name in names if name in self.gone]:
            raise DocumentsError(f"There is no collection named {missing[0]!r}.")
        return [Hit(name, Path(f"/c/{name}.txt"), None, None, 1.0, FACT, 1) for name in names][:limit]


def test_a_new_chats_collections_are_kept_until_its_first_message_saves_them(started_service) -> None:
    search = Collections(gone=["old"])

    async def scenario():
        async with started_service() as started:
            service, doors = started.service, started.doors
            service.documents.use_search(search.search)
            await doors.attach.set_chat_collections(["papers", "old", "papers"])
            assert doors.chat.conversation is None, "no chat is saved for a choice of collections"
            assert doors.attach.chat_collections() == ("papers", "old")
            assert doors.chat.send(QUESTION)
            await doors.chat.wait_idle()
            conversation_id = doors.chat.conversation.id
            assert doors.chat.conversation.collections == ("papers", "old") == doors.attach.chat_collections()
            assert search.asked[-1] == (QUESTION, ("papers",)), "the one that is gone is left out"
            used = service.documents.used(conversation_id)
            assert "The collection 'old' was not searched for this answer" in used.problem
            assert used.problem in [problem.text for problem in started.events.of(ev.Problem)], "the window says it"
            assert [s.path for s in used.sources] == ["/c/papers.txt"]
            _, answer = await stored(service, conversation_id)
            assert [s.path for s in answer.sources] == ["/c/papers.txt"]
            assert started.events.of(ev.AnswerFinished)[-1].message.text, "answered all the same"
            await doors.attach.set_chat_collections(["papers"])
            assert doors.attach.chat_collections() == ("papers",)
            doors.chat.new_conversation()
            assert doors.attach.chat_collections() == ()
            await doors.attach.set_chat_collections(["notes"])
            await doors.chat.open_conversation(conversation_id)
            assert doors.attach.chat_collections() == ("papers",), "a new chat's choice goes with it"
        async with started_service(install_model=False) as again:
            await again.doors.chat.open_conversation(conversation_id)
            assert again.doors.attach.chat_collections() == ("papers",)

    run(scenario)


def test_read_attachments_reads_in_the_worker_and_names_what_it_cannot(started_service, tmp_path: Path) -> None:
    club = tmp_path / "club.md"
    club.write_text(f"# Club\n\n{FACT}\n", encoding="utf-8")

    async def scenario():
        async with started_service(start="open") as started:
            doors = started.doors
            (file,) = await doors.attach.read_attachments([club])
            assert (file.path, file.kind, file.name) == (str(club), "markdown", "club.md") and FACT in file.text
            with pytest.raises(AttachmentsUnreadable) as refused:
                await doors.attach.read_attachments([club, tmp_path / "gone.pdf"])
            assert str(refused.value).startswith(f"{tmp_path / 'gone.pdf'} cannot be read")

    run(scenario)


class _Service:
    """What collection_search uses of DocumentsService: the collections last known, and search,
    which leaves out a name it does not know (as the real one does)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)

    def collections(self):
        return tuple(SimpleNamespace(name=name) for name in self.names)

    async def search(self, question: str, names: Sequence[str], limit: int) -> list[Hit]:
        return [Hit(name, Path(f"/c/{name}.txt"), None, None, 1.0, FACT, 1) for name in names if name in self.names]


def test_the_windows_search_says_which_collection_is_gone_where_the_service_leaves_it_out() -> None:
    import asyncio

    from app.service.chats.chat_collections import collection_search
    from app.service.documents.document_context import ChatDocuments
    from tests.service.test_document_context import chat, turn

    service = _Service(["papers", "old"])
    documents = ChatDocuments(lambda: None)
    documents.use_search(collection_search(service))
    service.names.remove("old")  # removed in the Documents window after the chat chose it
    framed = asyncio.run(documents.frame(chat(("papers", "old")), [turn(1, Role.USER, QUESTION)]))
    assert framed.problem.startswith("The collection 'old' was not searched for this answer: There is no "
                                     "collection named 'old' any more.")
    assert [source.path for source in framed.sources] == ["/c/papers.txt"]


def test_a_reader_that_cannot_start_is_said_in_words(tmp_path: Path) -> None:
    def cannot_start(paths):
        raise RuntimeError("the document reader process did not start")  # as LimitedChild says it

    note = tmp_path / "note.txt"
    note.write_text("hello", encoding="utf-8")
    with pytest.raises(AttachmentsUnreadable, match="^Kestrel could not start its document reader: the document "
                                                    "reader process did not start. Try again"):
        read_attachments([note], cannot_start)
