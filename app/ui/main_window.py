"""MainWindow: the chat list on the left; the open chat's header, messages and composer on the right."""

from __future__ import annotations

import asyncio
import dataclasses

import shiboken6
from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QCloseEvent, QGuiApplication, QHideEvent, QShowEvent
from PySide6.QtWidgets import QApplication, QSplitter, QWidget

from app.core.paths import DataPaths
from app.library.servers.faults import ServerFault
from app.library.servers.records import parse_address, split_model_id
from app.service.doors.window import WindowDoors
from app.service.events import ModelState
from app.service.models.background import WindowState
from app.service.tools.tool_use import ToolDecision
from app.ui.common import icons
from app.ui.about import AboutDialog
from app.ui.state.adapter import ServiceAdapter
from app.ui.chat.chat_attach import ChatAttach
from app.ui.chat.chat_files import ChatFiles
from app.ui.chat.chat_pane import ChatPane
from app.ui.chat.drafts import DraftKeeper
from app.ui.models.hardware_view import HardwareWindow
from app.ui.memory.memory_host import MemoryHost
from app.ui.projects.project_scope import ProjectScope
from app.ui.projects.projects_host import ProjectsHost, window_choices
from app.ui.messages.image_viewer import ImageViewer
from app.ui.models.model_manager import ModelManager
from app.ui.server.server_host import ServerHost
from app.ui.server.server_window import ServerWindow, status_words
from app.ui.chat.sidebar import Sidebar
from app.ui.messages.source_popup import SourcePopup
from app.ui.status_line import StatusLine
from app.ui.common.theme import apply_theme, part_styles
from app.ui.common.tray import KestrelTray, still_running_words, tray_available, tray_tooltip
from app.ui.common.window_presence import window_state
from app.ui.window_commands import WindowCommands
from app.ui.window_geometry import restore_window_state, save_window_state, state_file
from app.ui.window_log import WindowLog
from app.ui.window_menus import build_menus
from app.ui.voice.dictation_control import DictationControl
from app.ui.voice.read_aloud_control import ReadAloudControl
from app.ui.voice.voice_mode_control import VoiceModeControl


class MainWindow(WindowCommands):
    """Only wiring and presentation: the work happens in the service, behind `doors`.

    Each part of the window calls the service through its own door (WindowDoors) and hears
    it through `adapter`; none touches the history, the settings file or the engine. It owns the API server
    (`server`, a ServerHost) and the tray icon (`tray`), shown while the window waits hidden in the tray:
    closed with quick ask on, or while the server serves with `tray_on_close`, where the desktop has a tray.
    """

    closed = Signal()

    def __init__(self, doors: WindowDoors, paths: DataPaths) -> None:
        super().__init__()
        self.doors = doors
        self.paths = paths  # where this window's data is kept (About shows it)
        self.log = WindowLog(paths)  # before start-up: its first failures are logged too
        doors.subscribe(self.log.heard)
        self.adapter = ServiceAdapter(doors, self)
        self._theme: str | None = None
        self._activity: tuple[str, int | None] = ("Idle", None)
        self._searches = 0
        self.model_manager: ModelManager | None = None
        self.hardware_window: HardwareWindow | None = None
        self.about: AboutDialog | None = None
        self.server_window: ServerWindow | None = None
        self.server = ServerHost(self.adapter, doors.settings, doors.api, self)
        self.tray = KestrelTray(icons.app_icon, self)
        self.shortcut_held = True  # quick ask's global shortcut is ours (set_shortcut_held)
        self.shortcut_words = ""  # its state in words, for Settings → Quick ask
        self._tray_start_unchecked = False  # started in the tray before the settings were read
        self.setWindowTitle("Kestrel")
        self.resize(1180, 780)
        self.sidebar = Sidebar(self.adapter, self)
        self.sidebar.setObjectName("sidebar")
        self.chat = ChatPane(self.adapter, doors.chat, doors.model, self)
        self.header, self.composer, self.messages = self.chat.header, self.chat.composer, self.chat.messages
        self.splitter = QSplitter(self)
        self.splitter.setObjectName("mainSplitter")
        self.splitter.addWidget(self.sidebar)
        self.splitter.addWidget(self.chat)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([270, 910])
        self.splitter.setChildrenCollapsible(False)
        self.splitter.setHandleWidth(1)
        self.setCentralWidget(self.splitter)
        restore_window_state(self, self.splitter, state_file(paths))  # as the person left it
        self.status = StatusLine(self)
        self.status.setObjectName("statusLine")
        self.statusBar().addWidget(self.status, 1)
        self.drafts = DraftKeeper(doors.chat, self.composer, self)
        self.attachments = ChatAttach(self, self.composer, doors.chat, doors.attach, self.adapter.spawn)
        self.dictation = DictationControl(doors.voice, self.composer, self, self.adapter.spawn)  # the mic button
        self.read_aloud = ReadAloudControl(doors.read_aloud, self.messages, self, messages=self.adapter.messages.messages,
                                           show_problem=self.chat.show_problem)  # each answer's speaker
        self.voice_mode = VoiceModeControl(doors.voice_mode, doors.voice, doors.read_aloud, doors.settings, self.composer,
                                           self.dictation, self, read_aloud_escape=self.read_aloud.escape)  # hands-free
        self.chat_files = ChatFiles(self.adapter, doors.chat, doors.files, self)
        self.chat_files.on_exported = self.status.show_exported
        self.memory = MemoryHost(self.adapter, doors, self)  # the Memory window, an answer's used memories
        self.projects = ProjectsHost(  # the chat list's Projects grouping, the project dialog
            doors.projects, doors.chat, self.sidebar.projects, ProjectScope(self.sidebar.filter.set_matches),
            spawn=self.adapter.spawn, problem=self.adapter.problem.emit, subscribe=doors.subscribe, parent=self,
            choices=lambda: window_choices(self.adapter.installed.rows(), doors.tools.servers(),
                                           doors.documents.collections()))
        self.projects.follow_chat_list(self.sidebar.conversation_list)
        self.menu_actions = build_menus(self, self.open_logs, self.memory.show_window, self.voice_mode.action)
        self._name_parts()
        self._connect()
        self._model_state_changed()
        self._conversation_opened()
        self._answer_queue_changed()
        self._set_tab_order()
        self.composer.edit.setFocus()

    # --- building ---------------------------------------------------------------------

    def _name_parts(self) -> None:
        """Short names for the parts tests and scripts reach for."""
        pane = self.chat
        self.banner, self.banner_row, self.history_panel = pane.banner, pane.banner_row, pane.history_panel
        self.stack, self.empty, self.empty_text = pane.stack, pane.empty, pane.empty_text
        self.import_button, self.first_run = pane.import_button, pane.first_run
        self.search = self.sidebar.search
        self.conversation_list = self.sidebar.conversation_list
        self.filter = self.sidebar.filter
        self.new_button = self.sidebar.new_button
        self.model_label = self.status.model
        self.device_label = self.status.device
        self.activity_label = self.status.activity
        self.progress = self.status.progress
        self.cancel_setup = self.status.cancel
        self.action_copy_last = self.menu_actions.copy_last

    def _set_tab_order(self) -> None:
        """Keyboard users move chats → messages → composer → send, in reading order, but for the
        paperclip: after the message box (Shift+Tab from the box goes straight to the messages)."""
        chain = [self.new_button, self.search, self.conversation_list, self.header.model_button,
                 self.header.settings_button, self.messages, self.chat.approval.arguments,
                 self.chat.approval.copy_button, self.chat.approval.allow_button, self.chat.approval.always_button,
                 self.chat.approval.deny_button, self.composer.edit, self.composer.attach_button,
                 self.composer.image_button, self.composer.documents_button, self.composer.mic_button,
                 self.composer.voice_mode_button, self.composer.button]
        for first, second in zip(chain, chain[1:]):
            QWidget.setTabOrder(first, second)

    def _connect(self) -> None:
        s = self.adapter
        self.sidebar.newChatRequested.connect(self.new_conversation)
        self.sidebar.conversationChosen.connect(self.open_chat)
        self.sidebar.searchChanged.connect(self.run_search)
        self.sidebar.deleteRequested.connect(self._delete_chat)
        self.header.modelChosen.connect(self.choose_chat_model)
        self.header.model_menu.aboutToShow.connect(self.ask_servers_for_header)
        self.header.managerRequested.connect(self.show_model_manager)
        self.header.settingsRequested.connect(self.edit_chat_settings)
        self.composer.sendRequested.connect(self.attachments.send)
        self.attachments.sent.connect(self.messages.scroll_to_end)
        self.composer.stopRequested.connect(self.stop_open_chat)
        self.messages.regenerateRequested.connect(self.regenerate)
        self.messages.editRequested.connect(self.edit_message)
        self.messages.sourceChosen.connect(lambda source: SourcePopup(source, self).open())
        self.messages.imageChosen.connect(lambda image: ImageViewer(image, s.spawn, self).open())
        self.memory.follow(self.messages)
        self.memory.propose_in(self.chat.proposal)  # Kestrel's proposals after a chat, above the composer
        self.import_button.clicked.connect(self.choose_model_file)
        self.status.managerRequested.connect(self.show_model_manager)
        self.status.hardwareRequested.connect(self.show_hardware)
        self.status.chatRequested.connect(self.open_chat)
        self.status.serverRequested.connect(self.show_server_window)
        self.server.changed.connect(self._server_changed)
        self.tray.openRequested.connect(self.bring_to_front)
        self.tray.quitRequested.connect(self.quit)
        self.status.cancel.clicked.connect(self.doors.model.cancel_setup)
        self.first_run.follow(s, self.doors.model, self.doors.library)
        self.first_run.managerRequested.connect(self.show_model_manager)
        self.chat.banner_close.clicked.connect(lambda: self.chat.show_problem(""))
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._system_colors_changed)
        app = QGuiApplication.instance()
        if isinstance(app, QGuiApplication):
            # A bound method: Qt drops the connection when the window is destroyed.
            app.applicationStateChanged.connect(self._application_state_changed)
        s.approvalsChanged.connect(self.chat.show_approval)
        self.chat.approval.decided.connect(self._tool_decided)
        s.problem.connect(self.chat.show_problem)
        s.problemSolved.connect(self.chat.problem_solved)
        s.sendFailed.connect(self.drafts.put_back)
        s.answerQueueChanged.connect(self._answer_queue_changed)
        s.activityChanged.connect(self._activity_changed)
        s.paceChanged.connect(self._pace_changed)
        s.modelStateChanged.connect(self._model_state_changed)
        s.conversationOpened.connect(self._conversation_opened)
        s.settingsChanged.connect(self._settings_changed)
        s.setupProgress.connect(self.status.show_progress)
        s.setupFinished.connect(self.status.hide_progress)
        s.historyDamaged.connect(self.history_panel.show_found)
        s.historyReplaced.connect(self.history_panel.show_done)
        s.installed.modelReset.connect(self._show_chat_model)
        self.history_panel.recoverRequested.connect(lambda: s.spawn(self._replace_history(True)))
        self.history_panel.freshRequested.connect(lambda: s.spawn(self._replace_history(False)))

    # --- reacting ---------------------------------------------------------------------

    def _tool_decided(self, approval_id: int, decision: str) -> None:
        """The user chose about a tool call; the service runs it (or tells the model no) and settles it."""
        self.doors.tools.answer(approval_id, ToolDecision(decision))

    def open_chat(self, conversation_id: int) -> None:
        open_now = self.doors.chat.conversation
        if open_now is None or conversation_id != open_now.id:
            self.drafts.flush()
            self.adapter.spawn(self.doors.chat.open_conversation(conversation_id))

    def run_search(self, query: str | None = None) -> None:
        """Search the history off the UI thread; a later search makes this one's answer moot."""
        self._searches += 1
        self.adapter.spawn(self._search(self.search.text() if query is None else query, self._searches))

    async def _search(self, query: str, number: int) -> None:
        matches = await self.doors.history.search(query)
        if number == self._searches:
            self.projects.scope.set_search(matches)

    def _conversation_opened(self) -> None:
        conversation = self.doors.chat.conversation
        self.sidebar.select(conversation.id if conversation is not None else None)
        self.header.set_title(conversation.title if conversation is not None else "New chat")
        self.setWindowTitle(f"{conversation.title} – Kestrel" if conversation is not None else "Kestrel")
        for action in (self.menu_actions.export_markdown, self.menu_actions.export_json, self.menu_actions.delete_chat):
            action.setEnabled(conversation is not None)
        self.drafts.chat_opened()
        self.attachments.chat_opened()
        self._show_chat_model()
        self._answer_queue_changed()
        self._show_activity()
        self.chat.show_approval()
        self.chat.update_stack()

    def _show_chat_model(self) -> None:
        """The header names the model this chat uses: its own choice, or the default."""
        rows = self.adapter.installed.rows()
        default = next((row.model.title for row in rows if row.is_default), None)
        model = self.doors.model.app_model or self.doors.model.model  # a chat's own model is not the default
        if default is None and model is not None:
            default = model.title
        model_id = self.doors.chat.conversation_model_id()
        # A server's model whose server was removed since: said, as a missing local model is (the default answers).
        gone = model_id is not None and split_model_id(model_id) is not None \
            and self.adapter.installed.row_of(model_id) is None and self.doors.servers.known(model_id) is None
        self.header.set_model(model_id, default or "none chosen", server_gone=gone)
        self.attachments.refresh_vision()  # the chat's model, or what is known of it, changed
        self.chat.messages.set_answers_from(self.doors.attach.answers_from())

    def choose_chat_model(self, model_id: str | None) -> None:
        """The header's choice of this chat's model: refused in words while this chat's answer is written or
        waits (that answer keeps the model it started with; choosing then would leave the header naming a
        model that is not the one answering)."""
        if self.doors.chat.open_chat_busy:
            self.chat.show_problem("This chat's model was not changed: an answer is being written. Wait for it "
                                   "to finish, or press Stop, then choose the model again.", "model")
            return
        self.adapter.spawn(self.doors.chat.set_conversation_model(model_id))

    def ask_servers_for_header(self) -> None:
        """The model menu opens: the servers' models as last listed at once, then each added server asked
        again (only servers the person added; none is asked before the menu is opened), and the library's
        models listed if they never were."""
        if self.adapter.installed.rowCount() == 0:
            # The library is listed when the model manager first opens: the menu lists its models too.
            self.adapter.spawn(self.doors.library.refresh())
        servers = self.doors.servers
        listed = servers.listed()
        self.header.set_remote_models([m for models in listed.values() for m in models])
        self.adapter.spawn(self._ask_servers())

    async def _ask_servers(self) -> None:
        door = self.doors.servers
        added = await door.servers()
        if not shiboken6.isValid(self.header):
            return  # the window closed meanwhile
        said = {server.name: "asking…" for server in added}
        self.header.set_remote_models([m for models in door.listed().values() for m in models], said)
        answers = await asyncio.gather(*(door.models(server.name) for server in added), return_exceptions=True)
        for server, answer in zip(added, answers):
            if isinstance(answer, ServerFault):
                said[server.name] = "did not answer (Manage models… says why)"
            elif isinstance(answer, BaseException):
                raise answer  # a bug, not the server's doing: the event loop logs it
            else:
                said[server.name] = "lists no models" if not answer else ""
        if not shiboken6.isValid(self.header):
            return
        self.header.set_remote_models([m for models in door.listed().values() for m in models],
                                      {name: words for name, words in said.items() if words})
        self._show_chat_model()  # the list read again: the chat's server may have been removed since

    def _answer_queue_changed(self) -> None:
        c = self.doors.chat
        open_now = c.conversation.id if c.conversation is not None else None
        waiting = open_now is not None and open_now in c.waiting_ids
        self.composer.set_streaming(c.open_chat_busy)
        other = self._title_of(c.answering_id) if c.answering_id not in (None, open_now) else ""
        self.composer.set_note(f"Your message waits for the answer in “{other}” to finish. "
                               "Stop (Esc) takes it out of the line; it stays in the chat."
                               if waiting and other else "")
        self.menu_actions.stop.setEnabled(c.open_chat_busy)
        self.menu_actions.regenerate.setEnabled(not c.open_chat_busy and c.conversation is not None)

    def _title_of(self, conversation_id: int | None) -> str:
        found = self.adapter.conversations.conversation(conversation_id) if conversation_id is not None else None
        return found.title if found is not None else "another chat"

    def _activity_changed(self, text: str, conversation_id: object) -> None:
        self._activity = (text, conversation_id if isinstance(conversation_id, int) else None)
        self._show_activity()

    def _show_activity(self) -> None:
        """The activity names its chat while another chat is open (it is said again on a switch)."""
        text, chat_id = self._activity
        open_now = self.doors.chat.conversation
        if chat_id is not None and (open_now is None or chat_id != open_now.id):
            self.status.set_activity(text, chat_id, self._title_of(chat_id))
        else:
            self.status.set_activity(text)

    def _model_state_changed(self) -> None:
        c = self.doors.model
        self.status.set_model(c.model_state, c.model_detail)
        shown = c.loaded if c.model_state == ModelState.READY else None
        if shown is None:
            self.status.set_device(None)
        else:
            fell_back = shown.fallback_reasons[0] if shown.fallback_reasons else ""
            on_server = parse_address(c.model.address) if c.model is not None and c.model.remote else None
            self.status.set_device(shown.device, (shown.placement_reason, *shown.fallback_reasons), fell_back,
                                   server=on_server[0] if on_server is not None else "")
        if c.model_state == ModelState.FAILED and self.chat.problem_kind != "engine":
            self.chat.show_problem(c.model_detail, "model")
        elif c.model_state == ModelState.READY:
            # A model answers again: a failed load or a dead engine is behind us.
            for kind in ("model", "engine"):
                self.chat.problem_solved(kind)
        self._show_chat_model()
        self.chat.update_stack()

    async def _replace_history(self, recover: bool) -> None:
        """The user chose what to do with a damaged history; the service does it."""
        history = self.doors.history
        chosen = history.recover_history() if recover else history.start_fresh_history()
        if not await chosen:
            self.history_panel.set_working(False)  # refused (an answer is running): choose again

    def _server_changed(self) -> None:
        self.log.server_changed(status_words(self.server))
        self.status.set_server(status_words(self.server))
        self.tray.set_tooltip(tray_tooltip(status_words(self.server)))
        self._window_state_changed()  # serving from the tray or not: the pace may change

    def _settings_changed(self) -> None:
        if self._tray_start_unchecked:
            self._tray_start_unchecked = False
            if not self.hides_to_tray(starting=True):
                self.bring_to_front()  # the person's settings keep Kestrel out of the tray
        # Restyling the app and laying out every visible message again is the slowest
        # thing the UI thread does: only when the theme is what changed.
        if self.doors.settings.settings.theme != self._theme:
            self.apply_theme()

    def apply_theme(self) -> None:
        app = QApplication.instance()
        assert isinstance(app, QApplication)
        self._theme = self.doors.settings.settings.theme
        dark = apply_theme(app, self._theme)
        for name, sheet in part_styles(dark).items():
            part = self.findChild(QWidget, name)
            if part is not None:
                part.setStyleSheet(sheet)
        self.menu_actions.themes[self._theme].setChecked(True)
        self.messages.delegate.dark = dark
        self.messages.delegate.clear()
        self.messages.viewport().update()

    def _system_colors_changed(self) -> None:
        if self.doors.settings.settings.theme == "system":
            self.apply_theme()

    def bring_to_front(self) -> None:
        """Another launch of Kestrel asked for this window (or the tray's Open): show it, on top, focused."""
        self.tray.hide()
        if self.isMinimized():
            self.showNormal()
        self.show()
        self.raise_()
        self.activateWindow()

    # --- window events ------------------------------------------------------------------

    def changeEvent(self, event: QEvent) -> None:  # Override QMainWindow.changeEvent.
        if event.type() in (QEvent.Type.WindowStateChange, QEvent.Type.ActivationChange):
            self._window_state_changed()
        super().changeEvent(event)

    def hideEvent(self, event: QHideEvent) -> None:  # Override QMainWindow.hideEvent.
        super().hideEvent(event)
        self._window_state_changed()

    def showEvent(self, event: QShowEvent) -> None:  # Override QMainWindow.showEvent.
        super().showEvent(event)
        self._window_state_changed()

    def _pace_changed(self, words: str) -> None:
        """The answer being written says it is paused or running gently, not only the status bar."""
        self.messages.delegate.streaming_note = words[:1].lower() + words[1:] if words else "writing…"
        self.messages.viewport().update()

    def _application_state_changed(self, _state: Qt.ApplicationState) -> None:
        self._window_state_changed()

    def _window_state_changed(self) -> None:
        if self._serving_from_tray():
            # Put away to serve, not to save power: API answers go on at the background's pace.
            self.doors.set_window_state(WindowState.BACKGROUND)
            return
        self.doors.set_window_state(window_state(self.isVisible(), self.isMinimized(),
                                                 QGuiApplication.applicationState()))

    def closeEvent(self, event: QCloseEvent) -> None:  # Override QMainWindow.closeEvent.
        self.drafts.flush()
        if not self.quitting and self.hides_to_tray():
            event.ignore()
            self._hide_to_tray()
            self._tell_about_the_tray_once()
            return
        self.tray.hide()
        save_window_state(self, self.splitter, state_file(self.paths))
        self.closed.emit()
        super().closeEvent(event)

    # --- the tray -----------------------------------------------------------------------

    def hides_to_tray(self, *, starting: bool = False) -> bool:
        """Whether closing the window hides it to the tray instead of quitting: quick ask is on, or
        the API server serves (starting: is to serve) with `tray_on_close`; and the desktop has a
        tray, since a window hidden with no icon could never come back."""
        settings = self.doors.settings.settings
        serves = settings.server.tray_on_close and (settings.server.enabled if starting else self.server.on)
        return (settings.quick_ask.enabled or serves) and tray_available()

    def start_in_tray(self) -> None:
        """Start hidden in the tray (`--background`: the sign-in start) where closing would hide
        the window there; otherwise show it. Called before the settings are read: the first
        settings heard check it again, and show the window if they keep Kestrel out of the tray."""
        if not self.hides_to_tray(starting=True):
            self.show()
            return
        self._tray_start_unchecked = True
        self._hide_to_tray()
        self._window_state_changed()  # never shown, so no hide event says it

    def set_shortcut_held(self, held: bool, words: str = "") -> None:
        """Quick ask's global shortcut is held (or another program has it): the tray's words say
        to press it only while it works, and Settings → Quick ask shows `words`."""
        self.shortcut_held = held
        self.shortcut_words = words
        self.log.shortcut_changed(held, words)
        self.shortcutStatusChanged.emit(held, words)

    def open_logs(self) -> None:
        """Help → Open logs: the folder in the file manager, or where it is when that cannot be done."""
        if not self.log.open_folder():
            self.chat.show_problem(f"Kestrel could not open its log folder. Open {self.log.folder} in your file "
                                   "manager (Help → About Kestrel shows the path to copy).")

    def _hide_to_tray(self) -> None:
        self.tray.show(tray_tooltip(status_words(self.server)))  # first: the hide event sees it
        if self.isVisible():  # its size and place now, in case Kestrel ends from the tray
            save_window_state(self, self.splitter, state_file(self.paths))
        self.hide()

    def _serving_from_tray(self) -> bool:
        return self.tray.shown and self.server.on and self.doors.settings.settings.server.tray_on_close

    def _tell_about_the_tray_once(self) -> None:
        """The first time the window goes to the tray: why Kestrel stays, and how to quit (saved as said)."""
        door = self.doors.settings
        settings = door.settings
        if settings.told_about_tray:
            return
        quick_ask = settings.quick_ask
        self.tray.tell("Kestrel is still running", still_running_words(
            quick_ask=quick_ask.enabled, shortcut=quick_ask.shortcut, shortcut_held=self.shortcut_held,
            server_words=status_words(self.server)))
        self.adapter.spawn(door.update_settings(dataclasses.replace(settings, told_about_tray=True)))

    async def shut_down(self) -> None:
        """Stop the API server (its open answers are cancelled), then the service."""
        await self.server.stop()
        await self.doors.shutdown()

