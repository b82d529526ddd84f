"""A chat whose own model is on a server, through the service: regenerate, stop, documents, tools."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.core.conversation import Role, TextPart, ToolCallPart, ToolResultPart
from app.core.paths import DataPaths, data_paths
from app.core.settings import SettingsFile
from app.library.importer import import_model_file
from app.library.models import ModelLibrary
from app.library.servers.records import ServerKind
from app.service import events as ev
from app.service.documents.document_context import Fit, framed_question
from app.service.doors.servers import ServersDoor
from app.service.models.client import EngineClient
from app.service.tools.tool_use import DENIED, ToolDecision
from tests.helpers.embedding_gguf import build_embedding_gguf
from tests.helpers.hostile_server import Script, hostile_server
from tests.helpers.recording_forwarder import Forwarder, forwarding
from tests.helpers.remote_peers import KestrelPeer, kestrel_peer
from tests.helpers.tiny_gguf import build_tiny_gguf, scripted_weights
from tests.helpers.tool_call_gguf import QWEN3_TEMPLATE
from tests.service.conftest import Started, StartService, install, run, stored
from tests.service.test_tool_use import _chat_with_tools
from tests.service.test_tool_use import time_server as time_mcp

time_server = time_mcp  # the fixture (the real mcp-server-time in this home's mcp.json), under the name tests ask for

pytestmark = pytest.mark.slow

# The clock model's call, as mcp-server-time names its tool and argument.
TIME_CALL = '{"name": "get_current_time", "arguments": {"timezone": "UTC"}}'
FACT = "The kestrel club meets on Thursdays at 7 in room 12."
QUESTION = "When does the kestrel club meet?"
SECTIONS = 20  # the handbook's: each its own chunk, more than the passages an answer is given


@dataclass(frozen=True)
class ChatPeer:
    """The second Kestrel on 127.0.0.1 with tiny models, spoken to as OpenAI-compatible through the forwarder in
    front of it (which keeps each request it passed on), and its models' ids."""

    peer: KestrelPeer
    forwarder: Forwarder
    plain: str  # the tiny model: a few tokens of anything
    clock: str  # a tiny model that writes "Checking." and a call of get_current_time for UTC, whatever it is asked


@pytest.fixture(scope="module")
def chat_peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChatPeer]:
    folder = tmp_path_factory.mktemp("chat-peer")
    plain_file = build_tiny_gguf(folder / "plain.gguf", name="kestrel-plain")
    clock_file = build_tiny_gguf(folder / "clock.gguf", chat_template=QWEN3_TEMPLATE.read_text(encoding="utf-8"),
                                 name="kestrel-clock",
                                 added_tokens=("Checking.", "<tool_call>", TIME_CALL, "</tool_call>"),
                                 weights=scripted_weights(["<0x0A>", "Checking.", "<tool_call>", TIME_CALL,
                                                           "</tool_call>"]))
    home = folder / "home"
    library = ModelLibrary(DataPaths(home / "data", home / "config", home / "cache", home / "logs").ensure().models)
    plain, clock = library.add_reference(plain_file), library.add_reference(clock_file)
    with kestrel_peer(home, plain_file) as peer, forwarding(peer.url) as forwarder:
        yield ChatPeer(peer, forwarder, plain.id, clock.id)


@asynccontextmanager
async def remote_chat(started_service: StartService, chat_peer: ChatPeer, model: str, *,
                      install_model: bool = True) -> AsyncIterator[Started]:
    """A service on the real engine, started up on the local tiny model, the peer added as a server, and the new
    chat's own model the peer's `model` (as chosen in the chat's header); nothing the peer was asked kept yet."""
    async with started_service(engine=EngineClient(), install_model=install_model) as started:
        servers = ServersDoor(started.service)
        await servers.add("peer", chat_peer.forwarder.url, ServerKind.OPENAI, chat_peer.peer.key)
        names = {m.name for m in await servers.models("peer")}
        # The peer's /v1/models lists its speech models and voices too (the voice extra is installed here): typed,
        # they are not offered as chat models.
        assert model in names and not names & {"whisper-tiny.en", "whisper-base", "en_US-joe-medium"}, names
        await started.doors.chat.set_conversation_model(f"peer/{model}")
        chat_peer.forwarder.seen.clear()
        yield started


def _turns(body: dict) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in body["messages"] if m["role"] != "system"]


def test_regenerating_replaces_the_answer_and_asks_the_peer_the_same_conversation_again(
        started_service: StartService, chat_peer: ChatPeer) -> None:
    async def scenario() -> None:
        async with remote_chat(started_service, chat_peer, chat_peer.plain) as started:
            chat = started.doors.chat
            for question in ("Tell me about kestrels.", "And their nests?"):
                assert chat.send(question)
                await chat.wait_idle()
            old = chat.messages[-1]
            assert old.stats is not None and old.stats.server == "peer" and old.stats.error == "", old.stats
            assert chat.regenerate()
            await chat.wait_idle()
            conversation = chat.conversation
            assert conversation is not None and conversation.model == f"peer/{chat_peer.plain}"
            kept = await stored(started.service, conversation.id)
            assert [m.id for m in chat.messages] == [m.id for m in kept]
            new = kept[-1]
            assert [m.role for m in kept] == [Role.USER, Role.ASSISTANT, Role.USER, Role.ASSISTANT]
            assert new.id != old.id and old.id not in [m.id for m in kept]
            assert new.stats is not None and new.stats.server == "peer" and new.stats.error == "" and new.text

    run(scenario)
    bodies = chat_peer.forwarder.chat_bodies()
    assert len(bodies) == 3  # the two answers, then the second again
    asked, again = bodies[1:]
    assert again["messages"] == asked["messages"]  # the same conversation, word for word: no turn twice
    [(_, first_answer)] = [(r, c) for r, c in _turns(bodies[1]) if r == "assistant"]
    assert _turns(again) == [("user", "Tell me about kestrels."), ("assistant", first_answer),
                             ("user", "And their nests?")]


def _handbook(folder: Path, sections: int = SECTIONS) -> list[str]:
    """A Markdown handbook whose sections (each a chunk of its own) are about other things but one, the club's
    meetings; the sections' texts."""
    topics = ["harbour tides", "orchard pruning", "railway timetables", "glacier melt", "bread ovens"]
    texts = [f"Section {i} on {topics[i % len(topics)]}: the figures for week {i} were recorded by the survey "
             f"team, checked twice and filed under shelf {i * 7 % 31}." for i in range(sections - 1)]
    texts.insert(sections // 2, FACT)
    folder.mkdir()
    (folder / "handbook.md").write_text("\n\n".join(f"## Part {i}\n\n{text}" for i, text in enumerate(texts)),
                                        encoding="utf-8")
    return texts


def test_a_collection_is_searched_here_and_only_the_passages_found_go_to_the_peer(
        started_service: StartService, chat_peer: ChatPeer, tmp_path: Path) -> None:
    library = ModelLibrary(data_paths().ensure().models)
    import_model_file(library, build_embedding_gguf(tmp_path / "embed.gguf"))  # its vectors are made here
    sections = _handbook(tmp_path / "club")

    async def scenario() -> object:
        async with remote_chat(started_service, chat_peer, chat_peer.plain) as started:
            collections, events = started.service.collections, started.events
            await collections.add_folder(tmp_path / "club")
            await events.until(lambda: (c := collections.collections()) and c[0].state is ev.IndexState.IDLE
                               and c[0].indexed == 1 and c[0].chunks == c[0].vectors > 0,
                               what="indexed, its vectors made here")
            assert collections.collections()[0].chunks == SECTIONS
            await started.doors.attach.set_chat_collections(["club"])
            assert started.doors.chat.send(QUESTION)
            await started.doors.chat.wait_idle()
            answer = started.doors.chat.messages[-1]
            assert answer.stats is not None and answer.stats.server == "peer" and answer.stats.error == ""
            assert answer.sources and {Path(s.path).name for s in answer.sources} == {"handbook.md"}
            conversation = started.doors.chat.conversation
            assert conversation is not None
            return started.doors.attach.sources(conversation.id)

    material = run(scenario)
    passages = material.sources
    [body] = chat_peer.forwarder.chat_bodies()
    asked = body["messages"][-1]
    assert asked["role"] == "user" and asked["content"] == framed_question(QUESTION, passages)
    assert any(FACT in p.text for p in passages)  # the section that answers, found
    # Nothing else of the file went: only the passages found, fewer than its sections.
    sent = json.dumps(body)
    assert 0 < len(passages) < SECTIONS
    assert [text for text in sections if text in sent] == [text for text in sections
                                                          if any(text in p.text for p in passages)]
    # The search was here: the peer was asked for the model's listing and the answer, nothing else.
    assert {path for _, path, _ in chat_peer.forwarder.seen} <= {"/v1/models", "/v1/chat/completions"}


def test_a_file_too_long_for_the_context_is_cut_here_and_only_its_best_passages_go_to_the_peer(
        started_service: StartService, chat_peer: ChatPeer, tmp_path: Path) -> None:
    sections = _handbook(tmp_path / "club", sections=200)  # far past the chat's context: not sent whole

    async def scenario() -> object:
        async with remote_chat(started_service, chat_peer, chat_peer.plain) as started:
            files = await started.doors.attach.read_attachments([tmp_path / "club" / "handbook.md"])
            assert started.doors.chat.send(QUESTION, attachments=files)
            await started.doors.chat.wait_idle()
            answer = started.doors.chat.messages[-1]
            assert answer.stats is not None and answer.stats.server == "peer" and answer.stats.error == ""
            conversation = started.doors.chat.conversation
            assert conversation is not None
            return started.doors.attach.sources(conversation.id)

    material = run(scenario)
    assert material.fit is Fit.RETRIEVED and any(FACT in p.text for p in material.sources)
    [body] = chat_peer.forwarder.chat_bodies()
    assert body["messages"][-1]["content"] == framed_question(QUESTION, material.sources)
    sent = json.dumps(body)
    assert 0 < len([text for text in sections if text in sent]) <= len(material.sources) < len(sections)


def test_the_peers_tool_call_waits_for_approval_runs_once_allowed_and_its_result_goes_back(
        started_service: StartService, chat_peer: ChatPeer, tiny_model: Path, time_server: None) -> None:
    install(tiny_model)
    settings_file = SettingsFile(data_paths().settings_file)
    # One round of calls, then the answer in words: the clock model calls again whatever it is given.
    settings_file.save(dataclasses.replace(settings_file.load(), tool_rounds=1))

    results: list[tuple[ToolCallPart, ToolResultPart]] = []  # each question's call and the result given back

    async def scenario() -> None:
        async with remote_chat(started_service, chat_peer, chat_peer.clock, install_model=False) as started:
            service, chat, events = started.service, started.doors.chat, started.events
            await _chat_with_tools(started)
            for decision in (ToolDecision.ALLOW_ONCE, ToolDecision.DENY):
                asked_before = len(events.of(ev.ToolApprovalAsked))
                assert chat.send("What time is it in UTC?")
                await events.until(lambda: len(events.of(ev.ToolApprovalAsked)) > asked_before, what="the question")
                asked = events.of(ev.ToolApprovalAsked)[-1]
                assert (asked.server, asked.tool) == ("time", "get_current_time")
                assert json.loads(asked.arguments) == {"timezone": "UTC"}
                # Waiting for the person: the call shown, nothing run, nothing more asked of the peer.
                shown = events.of(ev.ToolPartsChanged)[-1].parts
                assert [type(p) for p in shown] == [TextPart, ToolCallPart]
                assert len(chat_peer.forwarder.chat_bodies()) == (1 if decision is ToolDecision.ALLOW_ONCE else 3)
                service.tools.answer(asked.approval_id, decision)
                await chat.wait_idle()
            conversation = chat.conversation
            assert conversation is not None
            allowed, denied = [m for m in await stored(service, conversation.id) if m.role == Role.ASSISTANT]
            for answer in (allowed, denied):
                assert answer.stats is not None and answer.stats.server == "peer" and answer.stats.error == ""
            said, call, result = allowed.parts[:3]
            assert said == TextPart("Checking.") and isinstance(call, ToolCallPart) and call.call_id
            assert isinstance(result, ToolResultPart) and result.call_id == call.call_id and not result.denied
            assert json.loads(result.text)["timezone"] == "UTC"  # the real server ran it
            refused = denied.parts[2]
            assert isinstance(refused, ToolResultPart) and refused.denied and refused.text == DENIED
            denied_call = denied.parts[1]
            assert isinstance(denied_call, ToolCallPart)
            results[:] = [(call, result), (denied_call, refused)]

    run(scenario)
    bodies = chat_peer.forwarder.chat_bodies()
    assert len(bodies) == 4  # each question: the call, then the answer with its result
    for (call, result), (calling, answering) in zip(results, (bodies[:2], bodies[2:]), strict=True):
        assert {"get_current_time", "convert_time"} <= {t["function"]["name"] for t in calling["tools"]}
        assert calling["tool_choice"] == "auto"
        assert answering["messages"][-2:] == [
            {"role": "assistant", "content": "Checking.",
             "tool_calls": [{"id": call.call_id, "type": "function",
                             "function": {"name": "get_current_time", "arguments": call.arguments}}]},
            {"role": "tool", "content": result.text, "tool_call_id": call.call_id}]
        assert "tools" not in answering  # the last round: an answer in words


def test_stop_on_a_remote_chat_keeps_what_was_written_and_hangs_up(started_service) -> None:
    # Stop through the window's door, as on a local model: the answer so far is kept and saved, marked
    # stopped, and the connection to the server is closed (the server sees the hang-up), not left streaming.
    script = Script(words=["tick "], endless=True, delay_s=0.05)
    with hostile_server(script) as url:
        async def scenario() -> None:
            async with started_service(engine=EngineClient()) as started:
                doors, recorder = started.doors, started.events
                await ServersDoor(started.service).add("chatty", url, ServerKind.OPENAI, None)
                await doors.chat.set_conversation_model("chatty/m")
                assert doors.chat.send("Count for me")
                await recorder.until(lambda: recorder.of(ev.AnswerStarted), what="the answer")
                answer_id = recorder.of(ev.AnswerStarted)[-1].message.id
                await recorder.until(lambda: recorder.text_of(answer_id).count("tick") >= 3, what="some ticks")
                doors.chat.stop()
                await doors.chat.wait_idle()
                answer = doors.chat.messages[-1]
                assert answer.stats is not None and answer.stats.finish_reason == "cancelled"
                assert answer.text.startswith("tick tick tick ")
                assert (await stored(started.service, answer.conversation_id))[-1].text == answer.text

        run(scenario)
        assert script.hung_up.wait(10)
