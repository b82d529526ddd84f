"""What went wrong in the engine, as a code and facts: the engine fills them, each front end words them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from app.core.settings import DevicePreference
from app.engine.capabilities import Capability
from app.library.model_files.gguf_info import ModelFileErrorKind
from app.library.model_files.model_format import ModelFolderErrorKind
from app.library.servers.faults import ServerFacts


class ErrorKind(StrEnum):
    """What went wrong, so the caller knows what the user can do. They reach the CLI's
    exit status and the window's messages."""

    MODEL_FILE = "model_file"  # missing, not a model, corrupt, truncated; an address no backend takes
    MODEL_LOAD = "model_load"  # a valid file the runtime still could not load
    NO_MODEL = "no_model"  # generate before load
    PLACEMENT = "placement_refused"  # the device the user chose cannot run this model
    CONTEXT = "context_overflow"  # the prompt does not fit the context
    UNSUPPORTED = "unsupported"  # an answer shape (tools, a grammar) this model cannot have, or given wrong
    NO_VISION = "no_vision"  # images sent to a model that takes none (no projector, or it did not load)
    BAD_IMAGE = "bad_image"  # an image the model cannot read, too big, or too many of them
    SERVER = "server"  # a server the person added did not answer, refused, failed or dropped the answer
    PROTOCOL = "protocol"  # versions differ, or an unknown message
    INTERNAL = "internal"  # a bug in the engine; the facts say what
    CRASHED = "crashed"  # the engine process died (raised by the client, never sent)


# --- loading ----------------------------------------------------------------------------


@dataclass(frozen=True)
class BadModelFile:
    """The file or folder is not a model Kestrel can run; no device can fix it."""

    kind: ClassVar[ErrorKind] = ErrorKind.MODEL_FILE
    problem: ModelFileErrorKind | ModelFolderErrorKind
    # The library's words (app/library/model_files/gguf_info.py, model_format.py): the model manager
    # and `kestrel models` show the same sentence, so every front end uses it as it is.
    reason: str


@dataclass(frozen=True)
class NotEnoughMemory:
    """The model and its context need more memory than is free now for the CPU."""

    kind: ClassVar[ErrorKind] = ErrorKind.MODEL_LOAD
    name: str
    needed: int
    available: int
    context_length: int


@dataclass(frozen=True)
class GgufRefused:
    """llama.cpp could not load a file whose header reads well; reason is llama.cpp's."""

    kind: ClassVar[ErrorKind] = ErrorKind.MODEL_LOAD
    name: str
    architecture: str
    reason: str


class OnnxTrouble(StrEnum):
    """Why ONNX Runtime GenAI refused a folder, as far as its message tells."""

    MISSING_WEIGHTS = "missing_weights"  # the .data file beside the graph is missing or short
    DEVICE = "device"  # this machine or this build cannot use the device
    MODEL = "model"  # damaged, or made for a newer ONNX Runtime GenAI


@dataclass(frozen=True)
class OnnxRefused:
    """ONNX Runtime GenAI could not load a folder that reads well; reason is its message."""

    kind: ClassVar[ErrorKind] = ErrorKind.MODEL_LOAD
    name: str
    model_type: str
    where: str  # the device in words: "GPU (DirectML)", "CPU"
    reason: str
    trouble: OnnxTrouble
    decoder_file: str  # the graph whose .data file is missing, for MISSING_WEIGHTS


@dataclass(frozen=True)
class NoBackend:
    """No registered backend loads the model there: an address no backend takes (a path that holds no
    model is a BadModelFile, in the library's words)."""

    kind: ClassVar[ErrorKind] = ErrorKind.MODEL_FILE
    location: str


@dataclass(frozen=True)
class NoGpuBuild:
    """This llama.cpp was built without GPU offload, so a GPU placement cannot work."""

    kind: ClassVar[ErrorKind] = ErrorKind.MODEL_LOAD


@dataclass(frozen=True)
class ProviderMissing:
    """An ONNX Runtime execution provider Kestrel cannot use; reason is why its driver's
    library refused ("" when Kestrel has no way to drive it at all)."""

    kind: ClassVar[ErrorKind] = ErrorKind.MODEL_LOAD
    provider: str
    reason: str = ""


@dataclass(frozen=True)
class BadTemplate:
    """The chat template in the model's own settings does not compile; why says where."""

    kind: ClassVar[ErrorKind] = ErrorKind.MODEL_LOAD
    why: str


LoadFailure = NotEnoughMemory | GgufRefused | OnnxRefused | NoGpuBuild | ProviderMissing | BadTemplate


@dataclass(frozen=True)
class FailedOn:
    """One device loading tried, and why the model did not load there."""

    device: str  # placement's name for it
    failure: LoadFailure


@dataclass(frozen=True)
class NoDeviceWorked:
    """Every placement was tried and each failed; the last is the one the user can act on."""

    kind: ClassVar[ErrorKind] = ErrorKind.MODEL_LOAD
    attempts: tuple[FailedOn, ...]


@dataclass(frozen=True)
class DeviceRefused:
    """The device the user chose cannot run this model (app/hardware/placement.py)."""

    kind: ClassVar[ErrorKind] = ErrorKind.PLACEMENT
    preference: DevicePreference
    reason: str  # placement's words, which the model manager shows too


@dataclass(frozen=True)
class ServerFailed:
    """A server the person added failed loading its model or an answer (app/library/servers/faults.py has the
    facts and their words: the server's name and address, what it did and said). Streamed text before it stays."""

    kind: ClassVar[ErrorKind] = ErrorKind.SERVER
    facts: ServerFacts


# --- answering --------------------------------------------------------------------------


@dataclass(frozen=True)
class PromptTooLong:
    """The prompt alone is longer than the context."""

    kind: ClassVar[ErrorKind] = ErrorKind.CONTEXT
    prompt_tokens: int
    context_length: int


@dataclass(frozen=True)
class NoToolUse:
    """Tools were given to a model whose chat template takes none (app/engine/tool_calls/tool_calls.py)."""

    kind: ClassVar[ErrorKind] = ErrorKind.UNSUPPORTED
    name: str  # the model's file or folder name


@dataclass(frozen=True)
class Unsupported:
    """A part of an answer's shape the backend that runs the model cannot do (its registration does
    not declare it: app/engine/backends/spec.py); others: the registered backends that can."""

    kind: ClassVar[ErrorKind] = ErrorKind.UNSUPPORTED
    name: str  # the model's file or folder name, or its address
    backend: str  # the backend's name ("ONNX Runtime GenAI")
    capability: Capability
    others: tuple[str, ...] = ()


class ShapePart(StrEnum):
    """Which part of an AnswerShape was wrong."""

    GRAMMAR = "grammar"
    JSON_SCHEMA = "JSON schema"
    TOOLS = "tools"
    TOOL_CHOICE = "tool choice"


@dataclass(frozen=True)
class BadShape:
    """A part of an answer's shape cannot be used as given; reason says why, in words."""

    kind: ClassVar[ErrorKind] = ErrorKind.UNSUPPORTED
    part: ShapePart
    reason: str


ShapeFailure = NoToolUse | Unsupported | BadShape


@dataclass(frozen=True)
class NoVision:
    """Images were sent to a model that takes none: no projector was paired with it, or
    the one paired did not load (problem: Loaded.vision_problem's words, or "")."""

    kind: ClassVar[ErrorKind] = ErrorKind.NO_VISION
    name: str  # the model's file or folder name
    problem: str = ""


class ImageTrouble(StrEnum):
    """What is wrong with an image sent to a model (app/engine/backends/llama/image_prompt.py)."""

    NOT_AN_IMAGE = "not_an_image"  # not a PNG or JPEG, or the model's decoder refused it
    TOO_BIG = "too_big"  # more bytes than MAX_IMAGE_BYTES
    TOO_MANY = "too_many"  # more images in the prompt than MAX_IMAGES
    LEFT_OUT = "left_out"  # the chat template dropped the turn's images from the prompt


@dataclass(frozen=True)
class BadImage:
    """An image that cannot go to the model. message: the turn's index in Generate.messages
    (0-based), image: the image's index in that turn (0-based); for TOO_MANY, count is
    how many the prompt held and limit the most; for TOO_BIG, count is its size in bytes."""

    kind: ClassVar[ErrorKind] = ErrorKind.BAD_IMAGE
    trouble: ImageTrouble
    message: int = 0
    image: int = 0
    count: int = 0
    limit: int = 0


ImageFailure = NoVision | BadImage


@dataclass(frozen=True)
class NoModel:
    """An answer was asked for before any model was loaded."""

    kind: ClassVar[ErrorKind] = ErrorKind.NO_MODEL


# --- the engine itself ------------------------------------------------------------------


@dataclass(frozen=True)
class UnknownRequest:
    """The engine got a message it does not know (a bug, or a version mix-up)."""

    kind: ClassVar[ErrorKind] = ErrorKind.PROTOCOL
    name: str


@dataclass(frozen=True)
class OtherVersion:
    """The engine speaks another protocol version (found by the client, never sent)."""

    kind: ClassVar[ErrorKind] = ErrorKind.PROTOCOL
    engine_version: int


@dataclass(frozen=True)
class EngineBug:
    """An exception the engine did not expect: what it was, and where."""

    kind: ClassVar[ErrorKind] = ErrorKind.INTERNAL
    what: str  # "ValueError: ..."
    traceback: str


class During(StrEnum):
    """What the client was waiting for when the engine stopped."""

    START = "start"
    LOAD = "load"
    PROBE = "probe"
    GENERATE = "generate"
    COUNT = "count"  # counting tokens (CountTokens)
    RESET = "reset"
    FORGET_STATES = "forget_states"
    UNLOAD = "unload"
    IDLE = "idle"  # nothing: it stopped on its own (EngineClient.on_died)


class Hang(StrEnum):
    """Why Kestrel ended an engine that was still running."""

    IGNORED_STOP = "ignored_stop"  # it did not respond to Stop in time
    SILENT = "silent"  # it answered nothing, not even a ping, for too long


@dataclass(frozen=True)
class EngineStopped:
    """The engine process ended while something was asked of it (found by the client,
    never sent): exit_code is the process's, hang says why Kestrel ended it, if it did."""

    kind: ClassVar[ErrorKind] = ErrorKind.CRASHED
    exit_code: int | None
    during: During
    hang: Hang | None = None
    silent_s: float = 0.0  # for Hang.SILENT: how long it said nothing


Failure = (BadModelFile | NoBackend | ServerFailed | LoadFailure | NoDeviceWorked | DeviceRefused | PromptTooLong | ShapeFailure | ImageFailure
           | NoModel | UnknownRequest | OtherVersion | EngineBug | EngineStopped)
