"""Messages between the UI process and the engine process: small versioned dataclasses."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum

from app.core.answer_stats import AnswerStats, FinishReason
from app.core.conversation import Role
from app.core.generation import GenerationSettings
from app.core.settings import DevicePreference, PromptLookupMode
from app.engine.failures import ErrorKind, Failure
from app.hardware.report import HardwareReport

__all__ = [
    "PROTOCOL_VERSION", "Ack", "AckKind", "AnswerShape", "Cancel", "ChatMessage", "CountTokens", "Delta", "Done",
    "EngineEvent", "Error", "ErrorKind", "ForgetStates", "Generate", "Hello", "Load", "Loaded", "Pause", "Ping", "Probe",
    "Report", "Request", "Reset", "Resume", "Shutdown", "TokenCount", "ToolCall", "Unload",
]

# Bumped whenever a message gains, loses or changes a field. The engine announces its
# version in Hello and the client refuses to talk to an engine of another version.
# 14: GenerationSettings (in Generate) gained min_p.
PROTOCOL_VERSION = 16


# --- requests: UI process -> engine -------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    """One call the model made (Delta.tool_call) or a client sends back (ChatMessage.tool_calls):
    which tool, with what arguments (compact JSON object text)."""

    index: int  # 0, 1, ... within one answer
    id: str  # "call_<24 random url-safe characters>", made by the engine (models rarely give one)
    name: str
    arguments: str

    def key(self) -> tuple[str, str]:
        """Its tool and its arguments in one spelling (key order and spaces aside): two calls with the same
        key ask the same thing (a model repeating a call answered already)."""
        try:
            spelled = json.dumps(json.loads(self.arguments or "{}"), sort_keys=True, ensure_ascii=False)
        except ValueError:
            spelled = self.arguments
        return self.name, spelled


@dataclass(frozen=True)
class ChatMessage:
    """One turn of a conversation as the engine sees it; `thinking` is what a reasoning
    model thought before an earlier answer (templates decide whether it goes back).

    tool_calls: the functions an assistant turn called (the API server's clients send
    them back with the results); tool_call_id: which call a Role.TOOL turn answers.
    """

    role: Role
    content: str
    thinking: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    # Images the user attached to this turn (user turns only), each a PNG or JPEG that
    # Kestrel's image check made (app/service: decoded in the reader's worker process,
    # scaled down, metadata dropped); the engine hands them to the model's projector.
    images: tuple[bytes, ...] = ()

    def __post_init__(self) -> None:
        # Text is taken too ("user"), so that templates and tests can write turns plainly;
        # the engine then reads role.value, which a plain string would not have.
        object.__setattr__(self, "role", Role(self.role))


@dataclass(frozen=True)
class Load:
    """Load a model file, replacing the one loaded now."""

    request_id: int
    model_path: str
    context_length: int = 4096
    threads: int | None = None
    # The user's choice. The engine asks placement where that means for this model on
    # this machine, and tries the answers in order.
    device: DevicePreference = DevicePreference.AUTO
    # The model's own settings (app/library/model_defaults.py): GPU layers (None: as
    # placement decides; 0: none; -1: all), and a chat template that replaces the file's.
    gpu_layers: int | None = None
    chat_template: str | None = None
    # Saved conversation states (app/engine/backends/llama/state_store.py): RAM for the last few chats,
    # and files in state_dir; 0 bytes turns either off.
    state_ram_bytes: int = 0
    state_dir: str | None = None
    state_disk_bytes: int = 0
    # The model's vision projector (an mmproj GGUF the library paired with it); None: text only.
    projector_path: str | None = None


# What tool_choice may say besides a function's name.
TOOL_CHOICES = ("auto", "none", "required")


@dataclass(frozen=True)
class AnswerShape:
    """What an answer must look like beyond its messages (the API server's requests use it).

    Each part is asked of the backend that runs the model, which builds what it follows itself
    (llama.cpp's grammars in app/engine/backends/llama/grammar.py); a part its registration does
    not declare (app/engine/backends/spec.py) is refused before it sees the request.
    prompt: a raw completion: this text is the whole prompt, tokenized as it is (the
    model's BOS put in front when it wants one), no chat template; the messages are not used.
    grammar: GBNF (llama.cpp's grammar language) the whole answer follows (Capability.GRAMMARS).
    json_schema: a JSON schema the whole answer follows; json_object: the answer is one JSON
    object of any keys (response_format json_object). Both Capability.JSON_SCHEMAS; a grammar
    given beside them wins.
    tools: a JSON list of tools in the OpenAI/transformers shape
    ([{"type": "function", "function": {"name", "description", "parameters"}}]), given
    to the chat template as `tools`; the calls come back as Delta.tool_call.
    tool_choice: "auto" (the model decides), "none" (no tools are given), "required"
    (the answer is a call) or a function's name (the answer calls that one).
    """

    prompt: str | None = None
    grammar: str | None = None
    json_schema: str | None = None
    json_object: bool = False
    tools: str | None = None
    tool_choice: str = "auto"

    @property
    def uses_tools(self) -> bool:
        """Whether the model is given tools at all."""
        return self.tools is not None and self.tool_choice != "none"


@dataclass(frozen=True)
class Generate:
    """Answer a conversation; streams Delta events then one Done or Error."""

    request_id: int
    messages: tuple[ChatMessage, ...]
    # Sampling (min_p included) and length; settings.context_length is Load's business, not an answer's.
    settings: GenerationSettings = field(default_factory=GenerationSettings)
    stop: tuple[str, ...] = ()
    # Leave out the oldest turns (never the system prompt) when the conversation is
    # longer than the context, instead of refusing it. Done.stats says how many.
    trim_history: bool = False
    # CPU threads for this answer (None: as loaded). GGUF changes them between answers;
    # ONNX Runtime keeps the count its session was made with.
    threads: int | None = None
    # Prompt-lookup drafting (app/engine/backends/llama/prompt_lookup.py). GGUF only.
    prompt_lookup: PromptLookupMode = PromptLookupMode.OFF
    # A raw prompt, a grammar, tools: the window's chats never set it.
    shape: AnswerShape = field(default_factory=AnswerShape)
    # Save the conversation's state once answered (app/engine/backends/llama/state_store.py: RAM and
    # files). False for a chat that must leave no trace (a temporary chat): nothing of it is kept.
    keep_state: bool = True


@dataclass(frozen=True)
class Probe:
    """Describe the machine: answered with a Report."""

    request_id: int


@dataclass(frozen=True)
class CountTokens:
    """Count tokens with the loaded model's own tokenizer: answered with TokenCount.

    text: counted as it costs inside a prompt: no BOS put in front, and a control token's text
    (<|im_end|>) read as text, as the prompt reads text from outside. messages: when given, the whole
    prompt of that conversation instead (the chat template applied, the opening of the
    answer included, as Generate renders it; `thinking` as GenerationSettings.thinking);
    text is then unused. Answered beside a running answer, not after it
    (app/engine/counting.py says how and why that is safe).
    """

    request_id: int
    text: str = ""
    messages: tuple[ChatMessage, ...] | None = None
    thinking: bool = True


@dataclass(frozen=True)
class Cancel:
    """Stop the running generation between two tokens."""

    request_id: int


@dataclass(frozen=True)
class Ping:
    """Are you there? Answered with Ack(PING) by the engine's reader thread at once,
    whatever the model is doing: silence means the engine is stopped or hung."""

    request_id: int


@dataclass(frozen=True)
class Pause:
    """Hold the running generation between two tokens until Resume."""

    request_id: int


@dataclass(frozen=True)
class Resume:
    """Let a paused generation go on."""

    request_id: int


@dataclass(frozen=True)
class Reset:
    """Forget the cached conversation (the KV cache) but keep the model."""

    request_id: int


@dataclass(frozen=True)
class ForgetStates:
    """Drop every saved conversation state, in RAM and on disk (Ack FORGET_STATES)."""

    request_id: int


@dataclass(frozen=True)
class Unload:
    """Free the model's memory."""

    request_id: int


@dataclass(frozen=True)
class Shutdown:
    """Finish and exit the engine process."""

    request_id: int = 0


# --- events: engine -> UI process ---------------------------------------------------


@dataclass(frozen=True)
class Hello:
    """First event of every engine process."""

    protocol_version: int
    pid: int


@dataclass(frozen=True)
class Loaded:
    """A model is loaded and ready."""

    request_id: int
    model_path: str
    load_ms: float
    device: str
    context_length: int
    threads: int
    architecture: str
    chat_format: str
    # Why this device (placement's words) and why each device tried before it failed.
    placement_reason: str = ""
    fallback_reasons: tuple[str, ...] = ()
    # A reasoning model (its template has thinking markers), and whether its template
    # can turn the thinking on and off (GenerationSettings.thinking).
    thinks: bool = False
    thinking_switch: bool = False
    # The projector loaded: the model takes images. vision_problem says, in words, why a
    # projector that was asked for did not load (the model then answers text only).
    vision: bool = False
    vision_problem: str = ""
    # Its template takes tools (a tool-call family is known for it): Kestrel's own tools, such as
    # memory's remember, are offered only then, so a model without tool use still answers.
    calls_tools: bool = False


@dataclass(frozen=True)
class Report:
    """The engine's view of the machine."""

    request_id: int
    report: HardwareReport


@dataclass(frozen=True)
class TokenCount:
    """How many tokens CountTokens' text (or prompt) is for the model loaded now."""

    request_id: int
    tokens: int


@dataclass(frozen=True)
class Delta:
    """New text of the answer: always whole, valid UTF-8 characters. thinking: the text
    is a reasoning model's thinking before its answer, markers left out. tool_call: a
    call the answer made, whole (its text is then "")."""

    request_id: int
    text: str
    thinking: bool = False
    tool_call: ToolCall | None = None


@dataclass(frozen=True)
class Done:
    """The answer is complete; stats says how it went and why it ended. stop_sequence: which of
    the request's own stop strings ended it (None: the model ended it, or its template's stop,
    or a limit; the Anthropic API reports it as stop_sequence)."""

    request_id: int
    stats: AnswerStats
    stop_sequence: str | None = None

    @property
    def finish_reason(self) -> FinishReason:
        """stop, length, context or cancelled."""
        return self.stats.finish_reason


class AckKind(StrEnum):
    """Which request an Ack answers."""

    PING = "ping"
    PAUSE = "pause"
    RESUME = "resume"
    RESET = "reset"
    FORGET_STATES = "forget_states"
    UNLOAD = "unload"
    SHUTDOWN = "shutdown"


@dataclass(frozen=True)
class Ack:
    """A request without a streamed result (reset, unload, pause, resume, ping) took effect."""

    request_id: int
    what: AckKind


@dataclass(frozen=True)
class Error:
    """A request failed: facts a front end words (app/engine/failure_words.py), never sentences."""

    request_id: int
    failure: Failure

    @property
    def kind(self) -> ErrorKind:
        """What the user can do about it, for exit statuses and the kind of message."""
        return self.failure.kind


# Everything the UI process sends, and everything the engine sends back.
Request = (Load | Generate | CountTokens | Probe | Cancel | Ping | Pause | Resume | Reset | ForgetStates | Unload
           | Shutdown)
EngineEvent = Hello | Loaded | Report | TokenCount | Delta | Done | Ack | Error
