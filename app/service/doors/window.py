"""WindowDoors: every door the window's parts use, made from one Service."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from app.service.api.api_answers import ApiAnswers
from app.service.doors.attach import AttachDoor
from app.service.doors.chat import ChatDoor
from app.service.doors.documents import DocumentsDoor
from app.service.doors.history import ChatFilesDoor, HistoryDoor
from app.service.doors.memory import MemoryDoor
from app.service.doors.models import LibraryDoor, ModelDoor
from app.service.doors.projects import ProjectsDoor
from app.service.doors.read_aloud import ReadAloudDoor
from app.service.doors.servers import ServersDoor
from app.service.doors.settings import SettingsDoor, ToolsDoor
from app.service.doors.voice import DictationDoor
from app.service.doors.voice_mode import VoiceModeDoor
from app.service.event_bus import Listener
from app.service.models.background import WindowState
from app.service.root import Service


@dataclass
class WindowDoors:
    """The window uses every part of the service, each part of it through its own door: the chat
    pane and composer `chat` and `attach`, the chat list `history`, the File menu `files`, the
    status line and the empty chat `model`, the model manager `library` and `servers` (the servers
    the person added and their models), the Documents window `documents`, Settings `settings` and
    `tools`, the Memory page and "used N memories" `memory`, the chat list's projects `projects`,
    the API server `api` (ApiAnswers, the door app/server is given), the composer's microphone `voice`,
    the answers' speaker `read_aloud`, voice mode's button `voice_mode`.
    The window itself starts and stops the service (`start_up`, `shutdown`), says where it is
    (`set_window_state`: the engine's pace follows), hears the events (`subscribe`) and runs its calls on the service's loop (`spawn`)."""

    chat: ChatDoor
    attach: AttachDoor
    history: HistoryDoor
    files: ChatFilesDoor
    model: ModelDoor
    library: LibraryDoor
    servers: ServersDoor
    documents: DocumentsDoor
    settings: SettingsDoor
    tools: ToolsDoor
    memory: MemoryDoor
    projects: ProjectsDoor
    api: ApiAnswers
    voice: DictationDoor
    read_aloud: ReadAloudDoor
    voice_mode: VoiceModeDoor
    start_up: Callable[[], Awaitable[None]]
    shutdown: Callable[[], Awaitable[None]]
    set_window_state: Callable[[WindowState], None]
    subscribe: Callable[[Listener], Callable[[], None]]
    spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]]

    @classmethod
    def of(cls, service: Service) -> WindowDoors:
        return cls(chat=ChatDoor(service), attach=AttachDoor(service), history=HistoryDoor(service),
                   files=ChatFilesDoor(service), model=ModelDoor(service), library=LibraryDoor(service),
                   servers=ServersDoor(service), documents=DocumentsDoor(service), settings=SettingsDoor(service),
                   tools=ToolsDoor(service), projects=ProjectsDoor(service),
                   memory=MemoryDoor(service), api=service.api, voice=DictationDoor(service),
                   read_aloud=ReadAloudDoor(service), voice_mode=VoiceModeDoor(service),
                   start_up=service.start_up, shutdown=service.shutdown,
                   set_window_state=service.set_window_state, subscribe=service.subscribe, spawn=service.spawn)
