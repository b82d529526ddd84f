"""What the service tells its front ends: small frozen dataclasses, one per happening."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum, StrEnum
from pathlib import Path
from typing import Literal, Union

from app.core.conversation import Conversation, Message, Part
from app.core.settings import Settings
from app.engine.failures import Failure
from app.engine.protocol import Loaded
from app.service.library_events import (CatalogListed, CatalogRow, DownloadChanged, DownloadId, DownloadItem,
                                        DownloadState, LibraryListed, ModelRow, SpeechListed, SpeechRow,
                                        SpeechState)
from app.service.documents_events import (CollectionInfo, CollectionsChanged, DocumentsProblem, FileInfo,
                                          IndexingProgress, IndexState)
from app.service.memory_events import MemoriesChanged, MemoryProposalSettled, MemoryProposed
from app.tools.values import ServerStatus


class Pace(StrEnum):
    """How the engine runs (app/service/models/background.py chooses it): at full speed, gently, or paused."""

    FULL = "full"
    GENTLE = "gently"
    PAUSED = "pause"


class ModelState(str, Enum):
    """Where the model stands, as the status bar shows it."""

    NONE = "none"
    INSTALLING = "installing"
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"
    UNLOADED = "unloaded"  # given back to save memory; the next message loads it again


@dataclass(frozen=True)
class ModelStateChanged:
    """The model is none / installing / loading / ready / failed; detail says which or why.

    loaded is where the engine runs it (device, placement reason, fall-backs) when ready.
    """

    state: ModelState
    detail: str
    loaded: Loaded | None = None


@dataclass(frozen=True)
class SettingsChanged:
    """The app's settings were read at start-up or changed."""

    settings: Settings


@dataclass(frozen=True)
class ConversationsListed:
    """Every conversation, newest first (at start-up)."""

    conversations: tuple[Conversation, ...]


@dataclass(frozen=True)
class HistoryChangedElsewhere:
    """Another Kestrel process (an import, a delete, a chat) committed to the history file;
    a front end that shows the history reads it again (ChatController.follow_history)."""


@dataclass(frozen=True)
class ConversationChanged:
    """A conversation was created or changed; to_top when it moves to the top of the list."""

    conversation: Conversation
    to_top: bool = True


@dataclass(frozen=True)
class ConversationRemoved:
    """A conversation was deleted."""

    conversation_id: int


@dataclass(frozen=True)
class ConversationOpened:
    """The chat shown now (None: a new chat, not saved until its first message)."""

    conversation: Conversation | None
    messages: tuple[Message, ...]


@dataclass(frozen=True)
class MessageAdded:
    """A message was added to the open conversation (the user's, or an answer starting)."""

    message: Message


@dataclass(frozen=True)
class MessagesRemoved:
    """This message and every later one left the open conversation (regenerate, edit)."""

    conversation_id: int
    from_message_id: int


@dataclass(frozen=True)
class AnswerStarted:
    """The engine took the answer; its message is empty and growing."""

    message: Message


@dataclass(frozen=True)
class TextGrew:
    """New text of a growing answer (whole characters); front ends coalesce these.
    thinking: the text is a reasoning model's thinking before its answer."""

    conversation_id: int
    message_id: int
    delta: str
    thinking: bool = False


@dataclass(frozen=True)
class AnswerFinished:
    """The answer is complete (or stopped by the user); message.stats holds its stats."""

    message: Message


class InterruptReason(str, Enum):
    """Why an answer ended before the model finished it."""

    ENGINE_FAILED = "engine_failed"
    ENGINE_DIED = "engine_died"
    DISK = "disk"
    CONTEXT = "context"
    SHUTDOWN = "shutdown"


@dataclass(frozen=True)
class AnswerInterrupted:
    """The answer was cut short; the text so far is kept (message), reason says why.

    detail is in the window's words; failure, when the engine failed, holds the facts, so
    that another front end can word them its own way (the CLI names its flags).
    """

    message: Message
    reason: InterruptReason
    detail: str = ""
    failure: Failure | None = None


@dataclass(frozen=True)
class Queued:
    """The engine is busy with another front end's request; this one waits its turn."""

    position: int


ProblemKind = Literal["engine", "model", "history", "disk", "other"]


@dataclass(frozen=True)
class Problem:
    """Something the user should read: what went wrong and what to do.

    kind says what it is about, so a front end can take it away when that is solved
    (ProblemSolved): the engine, the model, the chat history, a file on disk, other.
    conversation_id: the chat whose message or answer it is about, where there is one (a
    window showing one chat leaves another's to it); None: about no chat in particular.
    """

    text: str
    kind: ProblemKind = "other"
    conversation_id: int | None = None


@dataclass(frozen=True)
class ProblemSolved:
    """What the last Problem of this kind said is over (a new engine answers again)."""

    kind: ProblemKind


@dataclass(frozen=True)
class AnswerQueueChanged:
    """The chat being answered (None: none) or the chats waiting their turn changed.

    waiting is in the order they will be answered.
    """

    answering: int | None
    waiting: tuple[int, ...]


@dataclass(frozen=True)
class DraftChanged:
    """A chat's unsent draft appeared or was emptied (conversation_id None: the new chat)."""

    conversation_id: int | None
    has_draft: bool


@dataclass(frozen=True)
class SendFailed:
    """A message could not be saved: its text is kept as that chat's draft, for the
    message box to show again (conversation_id None: the new chat)."""

    conversation_id: int | None
    text: str


@dataclass(frozen=True)
class ConversationModelChosen:
    """The open chat's model was chosen (model_id None: the default model).

    conversation_id None: the new chat, which keeps the choice until it is saved.
    """

    conversation_id: int | None
    model_id: str | None


@dataclass(frozen=True)
class DamagedHistoryFound:
    """The history file is damaged; it is left as it is until the user chooses.

    text says what happened and what the choices do, in plain words. in_memory: the
    file was found damaged at start-up and new chats are kept in memory meanwhile.
    The choices are ChatController.recover_history() and start_fresh_history().
    """

    text: str
    path: Path
    in_memory: bool


@dataclass(frozen=True)
class DamagedHistoryReplaced:
    """A new history took the damaged one's place; text says where the damaged file
    was kept and, after a recovery, how much of it was read."""

    text: str
    aside: Path | None
    conversations: int
    messages: int


@dataclass(frozen=True)
class BusyChanged:
    """The open chat is being answered or waits its turn (Send becomes Stop), or no
    longer; said again whenever another chat opens."""

    busy: bool


# The activity while an answer is written; "Thinking…" only while a reasoning model thinks.
WRITING = "Writing…"
THINKING = "Thinking…"


@dataclass(frozen=True)
class ActivityChanged:
    """What the engine is doing, in a few words (Idle, Writing…, Thinking…, Paused…).

    conversation_id: the chat whose answer this is about; None for what concerns no
    chat (loading a model, opening the history, idle).
    """

    text: str
    conversation_id: int | None = None


@dataclass(frozen=True)
class ServingChanged:
    """An API answer began to run (True), or the last one running ended (False)."""

    serving: bool


@dataclass(frozen=True)
class PaceChanged:
    """The engine now runs at full speed, gently or paused (app/service/models/background.py);
    words say so for the answer being written ("" at full speed)."""

    pace: Pace
    words: str


@dataclass(frozen=True)
class SetupProgress:
    """A slow file job (starter model, import) moved on; done == total when finished."""

    what: str
    done: int
    total: int


@dataclass(frozen=True)
class SetupFinished:
    """The slow file job ended (done, failed or cancelled)."""


@dataclass(frozen=True)
class RequestRecord:
    """One finished API request, for the window's list of recent requests."""

    at: datetime
    client: str  # "127.0.0.1:53412"
    endpoint: str  # "/v1/chat/completions"
    model: str  # the model id that answered ("" when none did)
    prompt_tokens: int
    completion_tokens: int
    tokens_per_s: float
    status: int  # the HTTP status sent


@dataclass(frozen=True)
class ApiRequestLogged:
    """The API server finished a request."""

    record: RequestRecord


@dataclass(frozen=True)
class ToolApprovalAsked:
    """A tool call waits for the user: run it once, always (this server's tool), or not."""

    approval_id: int
    conversation_id: int
    message_id: int
    server: str
    tool: str
    arguments: str  # JSON text, as the model wrote it
    # What the call will do in the person's words, where Kestrel's own tool says it ('Remember
    # "My daughter is called Ada."'); "" for an MCP server's tool (its arguments say it).
    summary: str = ""


@dataclass(frozen=True)
class ToolApprovalSettled:
    """The approval was answered or withdrawn (the answer stopped): its prompt goes away."""

    approval_id: int


@dataclass(frozen=True)
class ToolPartsChanged:
    """An answer's tool calls and results so far (a call without a result is running)."""

    conversation_id: int
    message_id: int
    parts: tuple[Part, ...]


@dataclass(frozen=True)
class ToolServersChanged:
    """An MCP server started, failed or stopped."""

    statuses: tuple[ServerStatus, ...]


Event = Union[ModelStateChanged, SettingsChanged, ConversationsListed, HistoryChangedElsewhere,
              ConversationChanged,
              ConversationRemoved, ConversationOpened, MessageAdded, MessagesRemoved, AnswerStarted,
              TextGrew, AnswerFinished, AnswerInterrupted, Queued, Problem, ProblemSolved, BusyChanged,
              AnswerQueueChanged, DraftChanged, SendFailed, ConversationModelChosen,
              ActivityChanged, PaceChanged, ServingChanged, SetupProgress, SetupFinished, DamagedHistoryFound, DamagedHistoryReplaced,
              LibraryListed, CatalogListed, SpeechListed, DownloadChanged, ApiRequestLogged,
              ToolApprovalAsked, ToolApprovalSettled, ToolPartsChanged, ToolServersChanged,
              CollectionsChanged, IndexingProgress, DocumentsProblem, MemoriesChanged, MemoryProposed,
              MemoryProposalSettled]


# Every event and value front ends take from here (the documents service's are defined in documents_events.py,
# the model library's in library_events.py, memory's in memory_events.py).
__all__ = ["ActivityChanged", "AnswerFinished", "AnswerInterrupted", "AnswerQueueChanged", "AnswerStarted",
           "ApiRequestLogged", "BusyChanged", "CatalogListed", "CatalogRow", "CollectionInfo", "CollectionsChanged",
           "ConversationChanged", "ConversationModelChosen", "ConversationOpened", "ConversationRemoved",
           "ConversationsListed", "DamagedHistoryFound", "DamagedHistoryReplaced", "DocumentsProblem", "DownloadChanged",
           "DownloadId", "DownloadItem", "DownloadState", "DraftChanged", "Event", "FileInfo", "HistoryChangedElsewhere",
           "IndexState", "IndexingProgress", "InterruptReason", "LibraryListed", "MemoriesChanged", "MemoryProposalSettled", "MemoryProposed", "MessageAdded", "MessagesRemoved",
           "ModelRow", "ModelState", "ModelStateChanged", "PaceChanged", "Problem", "ProblemKind", "ProblemSolved",
           "Queued", "RequestRecord", "SendFailed", "ServingChanged", "SettingsChanged", "SetupFinished", "SetupProgress", "SpeechListed", "SpeechRow",
           "SpeechState", "THINKING",
           "TextGrew", "ToolApprovalAsked", "ToolApprovalSettled", "ToolPartsChanged", "ToolServersChanged", "WRITING"]
