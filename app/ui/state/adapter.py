"""ServiceAdapter: the service's events as Qt signals and item-model updates."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.service import events as ev
from app.service.doors.window import WindowDoors
from app.service.events import DownloadChanged
from app.ui.state.bridge import StreamBridge
from app.ui.state.conversation_model import ConversationListModel
from app.ui.state.message_model import MessageListModel
from app.ui.state.download_items import DownloadsModel
from app.ui.state.model_items import CatalogModel, InstalledModelsModel


class ServiceAdapter(QObject):
    """Holds the item models the window shows and keeps them in step with the service's events.

    Signals: modelStateChanged (read ModelDoor's model_state / model_detail / loaded),
    activityChanged(text, conversation_id or None: the chat whose answer it is about),
    busyChanged(busy: the open chat is answered or waiting; said again when another chat
    opens), answerQueueChanged (read ChatDoor's answering_id / waiting_ids),
    problem(text, kind) and problemSolved(kind) (kind: engine, model, history, disk,
    other), sendFailed(chat id or None, text: a message that could not be saved, kept as
    that chat's draft), conversationOpened (the open chat, its title or its model changed),
    settingsChanged, setupProgress(what, done, total),
    setupFinished, historyDamaged(text) (the choices are HistoryDoor's recover_history
    and start_fresh_history), historyReplaced(text), catalogListed (read the `catalog`
    model or LibraryDoor's recommended()), downloadChanged(DownloadItem),
    apiRequestLogged(RequestRecord), approvalsChanged (read `approvals`: the tool calls
    waiting for the user, by approval id, oldest first), toolServersChanged(statuses),
    collectionsChanged(collections), indexingProgress(IndexingProgress) and
    documentsProblem(collection, text) (the documents service's). Text deltas
    are coalesced by `bridge` to one update per frame. `installed`, `catalog` and
    `downloads` are the model manager's item models. `conversations` keeps its
    ANSWERING, WAITING and HAS_DRAFT roles in step with the answers and drafts. When another
    Kestrel process changes the history, the chats are read again (off the UI thread) and
    the list follows; the sidebar keeps its selection.
    """

    modelStateChanged = Signal()
    activityChanged = Signal(str, object)
    paceChanged = Signal(str)  # words for the answer being written ("" at full speed)
    busyChanged = Signal(bool)
    answerQueueChanged = Signal()
    problem = Signal(str, str)
    problemSolved = Signal(str)
    sendFailed = Signal(object, str)  # chat id (None: the new chat), the text that was not saved
    conversationOpened = Signal()
    settingsChanged = Signal()
    setupProgress = Signal(str, int, int)
    setupFinished = Signal()
    historyDamaged = Signal(str)
    historyReplaced = Signal(str)
    catalogListed = Signal()
    speechListed = Signal(tuple)  # tuple[SpeechRow, ...]: Models → Speech's rows as they are now
    downloadChanged = Signal(object)
    apiRequestLogged = Signal(object)  # a RequestRecord: the API server finished a request
    approvalsChanged = Signal()  # read `approvals`: a tool call was asked about or settled
    toolServersChanged = Signal(object)  # tuple[ServerStatus, ...]: an MCP server started, failed, stopped
    collectionsChanged = Signal(tuple)  # tuple[CollectionInfo, ...]: the document collections as they are now
    indexingProgress = Signal(object)  # an IndexingProgress: how far a collection's indexing is, or why it waits
    documentsProblem = Signal(str, str)  # collection ("" for the whole index), plain words with what to do

    def __init__(self, doors: WindowDoors, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._chat, self._history, self._library = doors.chat, doors.history, doors.library
        self._spawn = doors.spawn
        self.conversations = ConversationListModel(self)
        self.messages = MessageListModel(self)
        self.bridge = StreamBridge(self)
        self.bridge.textGrew.connect(self.messages.append_text)
        self.installed = InstalledModelsModel(self)
        self.catalog = CatalogModel(self)
        self.downloads = DownloadsModel(self)
        self.approvals: dict[int, ev.ToolApprovalAsked] = {}
        self._sync_downloads()
        self.conversations.renameRequested.connect(
            lambda conversation_id, title: self.spawn(self._history.rename_conversation(conversation_id, title)))
        self._unsubscribe = doors.subscribe(self._on_event)
        # The service may outlive its window (a task still ending): stop listening
        # before the models it would update are gone.
        self.destroyed.connect(self._unsubscribe)

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task:
        """Run a service coroutine from a slot; the window never waits for it."""
        return self._spawn(coroutine)

    def _on_event(self, event: ev.Event | DownloadChanged) -> None:
        """Route one service event to the models and signals."""
        if isinstance(event, ev.TextGrew):
            self.bridge.push(event.message_id, event.delta, event.thinking)
        elif isinstance(event, (ev.AnswerFinished, ev.AnswerInterrupted)):
            self.bridge.flush()
            self.messages.replace(event.message)
        elif isinstance(event, ev.MessageAdded):
            self.messages.append(event.message)
        elif isinstance(event, ev.MessagesRemoved):
            self.messages.remove_from(event.from_message_id)
        elif isinstance(event, ev.ToolPartsChanged):
            self.bridge.flush()  # the text said before the call comes before it
            self.messages.set_parts(event.message_id, event.parts)
        elif isinstance(event, (ev.ToolApprovalAsked, ev.ToolApprovalSettled)):
            self._approval(event)
        elif isinstance(event, ev.ConversationOpened):
            self.bridge.flush()
            self.messages.reset_to(list(event.messages))
            self.conversationOpened.emit()
        else:
            self._on_other(event)

    def _on_other(self, event: ev.Event | DownloadChanged) -> None:
        if isinstance(event, ev.LibraryListed):
            self.installed.set_listing(event.rows, event.disk_total)
            self._sync_downloads()
        elif isinstance(event, ev.CatalogListed):
            self.catalog.set_rows(event.rows)
            self.catalogListed.emit()
        elif isinstance(event, ev.SpeechListed):
            self.speechListed.emit(event.rows)
        elif isinstance(event, DownloadChanged):
            self.downloads.put(event.item)
            self.downloadChanged.emit(event.item)
        elif isinstance(event, ev.HistoryChangedElsewhere):
            self.spawn(self._history.follow_history())  # read on the writer thread, not here
        elif isinstance(event, ev.ConversationsListed):
            self.conversations.reset_to(event.conversations)
            self.conversations.reset_drafted(self._history.drafted_ids)
        elif isinstance(event, ev.ConversationChanged):
            if not self._chat.is_temporary(event.conversation.id):  # a temporary chat is never listed
                self.conversations.update(event.conversation, event.to_top)
            if self._chat.conversation is not None and self._chat.conversation.id == event.conversation.id:
                self.conversationOpened.emit()
        elif isinstance(event, ev.ConversationRemoved):
            self.conversations.remove(event.conversation_id)
        elif isinstance(event, ev.ModelStateChanged):
            self.modelStateChanged.emit()
        elif isinstance(event, ev.BusyChanged):
            self.busyChanged.emit(event.busy)
        elif isinstance(event, ev.AnswerQueueChanged):
            self.conversations.set_answers(event.answering, event.waiting)
            self.answerQueueChanged.emit()
        elif isinstance(event, ev.DraftChanged):
            if event.conversation_id is not None:
                self.conversations.set_drafted(event.conversation_id, event.has_draft)
        elif isinstance(event, ev.SendFailed):
            self.sendFailed.emit(event.conversation_id, event.text)
        elif isinstance(event, ev.ConversationModelChosen):
            self.conversationOpened.emit()
        elif isinstance(event, ev.ActivityChanged):
            self.activityChanged.emit(event.text, event.conversation_id)
        elif isinstance(event, ev.PaceChanged):
            self.paceChanged.emit(event.words)
        elif isinstance(event, ev.Problem):
            self.problem.emit(event.text, event.kind)
        elif isinstance(event, ev.ProblemSolved):
            self.problemSolved.emit(event.kind)
        elif isinstance(event, ev.SettingsChanged):
            self.settingsChanged.emit()
        elif isinstance(event, ev.SetupProgress):
            self.setupProgress.emit(event.what, event.done, event.total)
        elif isinstance(event, ev.SetupFinished):
            self.setupFinished.emit()
        elif isinstance(event, ev.DamagedHistoryFound):
            self.historyDamaged.emit(event.text)
        elif isinstance(event, ev.DamagedHistoryReplaced):
            self.historyReplaced.emit(event.text)
        elif isinstance(event, ev.ApiRequestLogged):
            self.apiRequestLogged.emit(event.record)
        elif isinstance(event, ev.ToolServersChanged):
            self.toolServersChanged.emit(event.statuses)
        elif isinstance(event, ev.CollectionsChanged):
            self.collectionsChanged.emit(event.collections)
        elif isinstance(event, ev.IndexingProgress):
            self.indexingProgress.emit(event)
        elif isinstance(event, ev.DocumentsProblem):
            self.documentsProblem.emit(event.collection, event.text)

    def _approval(self, event: ev.ToolApprovalAsked | ev.ToolApprovalSettled) -> None:
        if isinstance(event, ev.ToolApprovalAsked):
            self.approvals[event.approval_id] = event
        else:
            self.approvals.pop(event.approval_id, None)
        self.conversations.set_asking({asked.conversation_id for asked in self.approvals.values()})
        self.approvalsChanged.emit()

    def approval_for(self, conversation_id: int | None) -> ev.ToolApprovalAsked | None:
        """The oldest tool call of that chat waiting for the user, if any."""
        return next((asked for asked in self.approvals.values() if asked.conversation_id == conversation_id), None)

    def _sync_downloads(self) -> None:
        """Downloads the queue holds: also the unfinished ones it brought back, paused, at its
        start, which no DownloadChanged announced."""
        queue = self._library.downloads
        if queue is not None:
            self.downloads.set_rows(queue.items())

    def close(self) -> None:
        """Stop listening (the window is gone)."""
        self._unsubscribe()
