"""The messages between the processes: settings, stats, enums and error facts as one shared definition."""

from __future__ import annotations

import json
import pickle

import typing

from app.core.answer_stats import AnswerStats
from app.core.conversation import Role
from app.core.generation import GenerationSettings
from app.core.settings import DevicePreference, PromptLookupMode
from app.engine import failures as f
from app.engine.capabilities import Capability
from app.engine import protocol as p
from app.service.models.engine_errors import EngineCrashed, EngineError

STATS = AnswerStats(ttft_ms=12.5, tokens=20, tokens_per_s=80.0, prompt_tokens=31, prompt_tokens_evaluated=9,
                    device="CPU", finish_reason="length", chat_format="embedded", total_ms=260.0,
                    messages_left_out=2)


def test_messages_cross_the_pipe_whole() -> None:
    settings = GenerationSettings(temperature=0.2, min_p=0.05, max_tokens=64, seed=7)
    messages = [p.Generate(3, (p.ChatMessage(Role.USER, "hi"),), settings, ("</s>",), True,
                           prompt_lookup=PromptLookupMode.AUTO),
                p.Load(2, "m.gguf", device=DevicePreference.NPU), p.Done(3, STATS), p.Ack(4, p.AckKind.PING),
                p.Error(3, f.PromptTooLong(900, 256)),
                p.Error(1, f.NoDeviceWorked((f.FailedOn("GPU", f.NoGpuBuild()),
                                             f.FailedOn("CPU", f.GgufRefused("m.gguf", "llama", "bad"))))),
                p.Error(1, f.DeviceRefused(DevicePreference.NPU, "No NPU."))]

    back = [pickle.loads(pickle.dumps(m)) for m in messages]

    assert back == messages
    assert back[0].messages[0].role is Role.USER and back[0].prompt_lookup is PromptLookupMode.AUTO
    assert back[1].device is DevicePreference.NPU and back[3].what is p.AckKind.PING
    assert messages[0].settings is settings and p.Generate(4, ()).settings == GenerationSettings()
    assert back[0].settings.min_p == 0.05


def test_shapes_tool_calls_and_tool_turns_cross_the_pipe_whole() -> None:
    call = p.ToolCall(0, "call_abc", "get_time", '{"zone":"UTC"}')
    shape = p.AnswerShape(prompt=None, grammar='root ::= "x"', json_schema='{"type": "object"}', json_object=True,
                          tools='[{"type": "function", "function": {"name": "get_time"}}]', tool_choice="required")
    turns = (p.ChatMessage(Role.USER, "time?"), p.ChatMessage(Role.ASSISTANT, "", tool_calls=(call,)),
             p.ChatMessage("tool", "12:00", tool_call_id="call_abc"))  # type: ignore[arg-type]
    messages = [p.Generate(5, turns, shape=shape), p.Delta(5, "", tool_call=call), p.Delta(5, "hi"),
                p.Error(5, f.NoToolUse("m.gguf")), p.Error(5, f.Unsupported("phi", "ONNX Runtime GenAI", Capability.GRAMMARS, ("llama.cpp",))),
                p.Error(5, f.BadShape(f.ShapePart.TOOL_CHOICE, "no such tool"))]

    back = [pickle.loads(pickle.dumps(m)) for m in messages]

    assert back == messages and p.PROTOCOL_VERSION == 16
    assert back[0].messages[2].role is Role.TOOL and back[0].messages[1].tool_calls == (call,)
    assert back[0].shape.uses_tools and back[2].tool_call is None and back[5].failure.part is f.ShapePart.TOOL_CHOICE
    assert {e.kind for e in back[3:]} == {p.ErrorKind.UNSUPPORTED} and p.ErrorKind.UNSUPPORTED == "unsupported"
    # A chat's answer has no shape: nothing changes for the window's requests.
    assert p.Generate(6, ()).shape == p.AnswerShape() and not p.AnswerShape().uses_tools
    assert not p.AnswerShape(tools="[]", tool_choice="none").uses_tools
    assert typing.get_type_hints(p.Delta)["tool_call"] == p.ToolCall | None


def test_a_role_given_as_text_becomes_a_role() -> None:
    # Templates and tests write turns plainly; the engine reads role.value.
    message = p.ChatMessage("assistant", "hello")  # type: ignore[arg-type]
    assert message.role is Role.ASSISTANT and message.role.value == "assistant"


def test_the_unions_hold_every_message_and_nothing_else() -> None:
    requests = {p.Load, p.Generate, p.CountTokens, p.Probe, p.Cancel, p.Ping, p.Pause, p.Resume, p.Reset,
                p.ForgetStates, p.Unload, p.Shutdown}
    events = {p.Hello, p.Loaded, p.Report, p.TokenCount, p.Delta, p.Done, p.Ack, p.Error}

    assert set(typing.get_args(p.Request)) == requests
    assert set(typing.get_args(p.EngineEvent)) == events
    assert typing.get_type_hints(p.Report)["report"].__name__ == "HardwareReport"


def test_each_failure_has_its_kind() -> None:
    assert p.Error(1, f.BadModelFile("truncated", "It is cut short.")).kind is p.ErrorKind.MODEL_FILE
    assert p.Error(1, f.NotEnoughMemory("m", 2, 1, 512)).kind is p.ErrorKind.MODEL_LOAD
    assert p.Error(1, f.DeviceRefused(DevicePreference.GPU, "No GPU.")).kind is p.ErrorKind.PLACEMENT
    assert p.Error(1, f.PromptTooLong(900, 256)).kind is p.ErrorKind.CONTEXT
    assert p.Error(1, f.NoModel()).kind is p.ErrorKind.NO_MODEL
    assert p.Error(1, f.UnknownRequest("Bogus")).kind is p.ErrorKind.PROTOCOL
    assert p.Error(1, f.EngineBug("ValueError: x", "Traceback")).kind is p.ErrorKind.INTERNAL


def test_done_says_its_finish_reason_once() -> None:
    assert p.Done(3, STATS).finish_reason == "length"


def test_answer_stats_round_trip_and_forgive_old_and_new_rows() -> None:
    assert AnswerStats.from_dict(json.loads(json.dumps(STATS.to_dict()))) == STATS
    assert set(STATS.to_dict()) == {
        "ttft_ms", "tokens", "tokens_per_s", "prompt_tokens", "prompt_tokens_evaluated", "device",
        "finish_reason", "chat_format", "total_ms", "messages_left_out", "template_note", "thinking_ms", "threads"}
    older = AnswerStats.from_dict({"tokens": 1, "device": "cpu", "ttft_ms": None, "from_the_future": 1})
    assert older == AnswerStats(tokens=1, device="cpu")


def test_error_kinds_are_strings_too() -> None:
    kind = p.ErrorKind.CONTEXT
    assert kind == "context_overflow" and str(kind) == "context_overflow" and f"{kind}" == "context_overflow"
    assert json.dumps({"kind": kind}) == '{"kind": "context_overflow"}'
    assert EngineError(f.NoModel()).kind is p.ErrorKind.NO_MODEL
    crashed = EngineCrashed(f.EngineStopped(-9, f.During.GENERATE))
    assert crashed.kind is p.ErrorKind.CRASHED and crashed.exit_code == -9 and crashed.during == "generate"


def test_images_and_their_refusals_cross_the_pipe_whole() -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40
    messages = [p.Generate(7, (p.ChatMessage(Role.USER, "what is this?", images=(png, png[:20])),)),
                p.Load(8, "m.gguf", projector_path="mmproj-m.gguf"),
                p.Loaded(8, "m.gguf", 1.0, "CPU", 4096, 4, "gemma3", "embedded", vision=False,
                         vision_problem="The vision projector mmproj-m.gguf could not be loaded."),
                p.Error(7, f.NoVision("m.gguf", "why")),
                p.Error(7, f.BadImage(f.ImageTrouble.TOO_MANY, count=17, limit=16))]

    back = [pickle.loads(pickle.dumps(m)) for m in messages]

    assert back == messages
    assert back[0].messages[0].images == (png, png[:20]) and back[1].projector_path == "mmproj-m.gguf"
    assert [e.kind for e in back[3:]] == [p.ErrorKind.NO_VISION, p.ErrorKind.BAD_IMAGE]
    assert (p.ErrorKind.NO_VISION, p.ErrorKind.BAD_IMAGE) == ("no_vision", "bad_image")
