"""MainWindow: the chat list on the left; the open chat's header, messages and composer on the right."""

from __future__ import annotations

import dataclasses

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QCloseEvent, QGuiApplication
from PySide6.QtWidgets import (QApplication, QFileDialog, QHBoxLayout, QLabel, QMainWindow, QMessageBox,
                               QPushButton, QSplitter, QStackedWidget, QToolButton, QVBoxLayout, QWidget)

from app.service.background import WindowState
from app.service.controller import ChatController
from app.service.events import ModelState
from app.ui import icons
from app.ui.about import AboutDialog
from app.ui.adapter import ControllerAdapter
from app.ui.chat_files import ChatFiles
from app.ui.chat_header import ChatHeader
from app.ui.composer import Composer
from app.ui.conversation_model import ConversationRoles
from app.ui.dialogs import ConversationSettingsDialog, DamagedHistoryPanel, EditMessageDialog, SettingsDialog
from app.ui.drafts import DraftKeeper
from app.ui.first_run import STARTER_TEXT, FirstRunOffer
from app.ui.hardware_view import HardwareWindow
from app.ui.message_view import MessageView
from app.ui.model_manager import ModelManager
from app.ui.sidebar import Sidebar
from app.ui.status_line import StatusLine
from app.ui.theme import apply_theme, window_style
from app.ui.window_menus import build_menus

# The messages and the composer share a column no wider than this, centred.
COLUMN_WIDTH = 820


class MainWindow(QMainWindow):
    """Only wiring and presentation: the work happens in the ChatController.

    The window calls the controller and listens to it through `adapter`; it never
    touches the history, the settings file or the engine.
    """

    closed = Signal()

    def __init__(self, controller: ChatController) -> None:
        super().__init__()
        self.controller = controller
        self.adapter = ControllerAdapter(controller, self)
        self._theme: str | None = None
        self._problem_kind = ""
        self._activity: tuple[str, int | None] = ("Idle", None)
        self._searches = 0
        self.model_manager: ModelManager | None = None
        self.hardware_window: HardwareWindow | None = None
        self.setWindowTitle("Kestrel")
        self.resize(1180, 780)
        self.sidebar = Sidebar(self.adapter, self)
        self.sidebar.setObjectName("sidebar")
        self._build_chat()
        self.splitter = QSplitter(self)
        self.splitter.addWidget(self.sidebar)
        self.splitter.addWidget(self.chat)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([270, 910])
        self.splitter.setChildrenCollapsible(False)
        self.setCentralWidget(self.splitter)
        self.status = StatusLine(self)
        self.statusBar().addWidget(self.status, 1)
        self.drafts = DraftKeeper(controller, self.composer, self)
        self.chat_files = ChatFiles(self.adapter, self)
        self.actions = build_menus(self)
        self._name_parts()
        self._connect()
        self._model_state_changed()
        self._conversation_opened()
        self._answer_queue_changed()
        self._set_tab_order()
        self.composer.edit.setFocus()

    # --- building ---------------------------------------------------------------------

    def _build_chat(self) -> None:
        self.chat = QWidget(self)
        self.chat.setObjectName("chatPane")
        self.header = ChatHeader(self.adapter, self.chat)
        self.banner = QLabel(self.chat)
        self.banner.setObjectName("banner")
        self.banner.setWordWrap(True)
        self.banner.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.banner_close = QToolButton(self.chat)
        self.banner_close.setObjectName("bannerClose")
        self.banner_close.setToolTip("Dismiss")
        self.banner_close.setAccessibleName("Dismiss")
        icons.themed(self.banner_close, "close", icons.ROLE.HighlightedText)
        self.banner_row = QWidget(self.chat)
        self.banner_row.setObjectName("bannerRow")
        banner_layout = QHBoxLayout(self.banner_row)
        banner_layout.setContentsMargins(0, 0, 0, 0)
        banner_layout.addWidget(self.banner, 1)
        banner_layout.addWidget(self.banner_close, 0, Qt.AlignmentFlag.AlignTop)
        self.history_panel = DamagedHistoryPanel(self.chat)
        self.messages = MessageView(self.chat)
        self.messages.setModel(self.adapter.messages)
        self.empty = self._build_empty_state()
        self.stack = QStackedWidget(self.chat)
        self.stack.addWidget(self.messages)
        self.stack.addWidget(self.empty)
        self.composer = Composer(self.chat)
        self.composer.setMaximumWidth(COLUMN_WIDTH)
        composer_row = QHBoxLayout()
        composer_row.setContentsMargins(16, 0, 16, 0)
        composer_row.addWidget(self.composer)
        layout = QVBoxLayout(self.chat)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.header)
        for widget in (self.banner_row, self.history_panel):
            inset = QHBoxLayout()
            inset.setContentsMargins(16, 8, 16, 0)
            inset.addWidget(widget)
            layout.addLayout(inset)
        layout.addWidget(self.stack, 1)
        layout.addLayout(composer_row)
        self._show_problem("")

    def _build_empty_state(self) -> QWidget:
        panel = QWidget(self.chat)
        self.empty_text = QLabel(panel)
        self.empty_text.setObjectName("emptyText")
        self.empty_text.setWordWrap(True)
        self.empty_text.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.import_button = QPushButton("Import a model file…", panel)
        self.first_run = FirstRunOffer(panel)
        layout = QVBoxLayout(panel)
        layout.addStretch(1)
        layout.addWidget(self.empty_text)
        layout.addWidget(self.import_button, 0, Qt.AlignmentFlag.AlignHCenter)
        centred = QHBoxLayout()  # not an alignment flag: that would ignore the card's wrapped height
        centred.addStretch(1)
        centred.addWidget(self.first_run)
        centred.addStretch(1)
        layout.addLayout(centred)
        layout.addStretch(1)
        return panel

    def _name_parts(self) -> None:
        """Short names for the parts tests and scripts reach for."""
        self.search = self.sidebar.search
        self.conversation_list = self.sidebar.conversation_list
        self.filter = self.sidebar.filter
        self.new_button = self.sidebar.new_button
        self.model_label = self.status.model
        self.device_label = self.status.device
        self.activity_label = self.status.activity
        self.progress = self.status.progress
        self.cancel_setup = self.status.cancel
        self.action_copy_last = self.actions.copy_last

    def _set_tab_order(self) -> None:
        """Keyboard users move chats → messages → composer → send, in reading order."""
        chain = [self.new_button, self.search, self.conversation_list, self.header.model_button,
                 self.header.settings_button, self.messages, self.composer.edit, self.composer.button]
        for first, second in zip(chain, chain[1:]):
            QWidget.setTabOrder(first, second)

    def _connect(self) -> None:
        s, c = self.adapter, self.controller
        self.sidebar.newChatRequested.connect(self.new_conversation)
        self.sidebar.conversationChosen.connect(self.open_chat)
        self.sidebar.searchChanged.connect(self.run_search)
        self.sidebar.deleteRequested.connect(self._delete_chat)
        self.header.modelChosen.connect(lambda model_id: s.spawn(c.set_conversation_model(model_id)))
        self.header.managerRequested.connect(self.show_model_manager)
        self.header.settingsRequested.connect(self.edit_chat_settings)
        self.composer.sendRequested.connect(self._send)
        self.composer.stopRequested.connect(self.stop_open_chat)
        self.messages.regenerateRequested.connect(self.regenerate)
        self.messages.editRequested.connect(self.edit_message)
        self.import_button.clicked.connect(self.choose_model_file)
        self.status.managerRequested.connect(self.show_model_manager)
        self.status.hardwareRequested.connect(self.show_hardware)
        self.status.chatRequested.connect(self.open_chat)
        self.status.cancel.clicked.connect(c.setup.cancel)
        self.first_run.follow(s)
        self.first_run.managerRequested.connect(self.show_model_manager)
        self.banner_close.clicked.connect(lambda: self._show_problem(""))
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._system_colors_changed)
        app = QGuiApplication.instance()
        if isinstance(app, QGuiApplication):
            # A bound method: Qt drops the connection when the window is destroyed.
            app.applicationStateChanged.connect(self._application_state_changed)
        s.problem.connect(self._show_problem)
        s.problemSolved.connect(self._problem_solved)
        s.busyChanged.connect(self.composer.set_streaming)
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

    def _send(self, text: str) -> None:
        if self.controller.send(text):
            self.composer.edit.clear()
            self.messages.scroll_to_end()

    def new_conversation(self) -> None:
        self.controller.new_conversation()
        self.composer.edit.setFocus()

    def open_chat(self, conversation_id: int) -> None:
        open_now = self.controller.conversation
        if open_now is None or conversation_id != open_now.id:
            self.drafts.flush()
            self.adapter.spawn(self.controller.open_conversation(conversation_id))

    def run_search(self, query: str | None = None) -> None:
        """Search the history off the UI thread; a later search makes this one's answer moot."""
        self._searches += 1
        self.adapter.spawn(self._search(self.search.text() if query is None else query, self._searches))

    async def _search(self, query: str, number: int) -> None:
        matches = await self.controller.search(query)
        if number == self._searches:
            self.filter.set_matches(matches)

    def _conversation_opened(self) -> None:
        conversation = self.controller.conversation
        self.sidebar.select(conversation.id if conversation is not None else None)
        self.header.set_title(conversation.title if conversation is not None else "New chat")
        self.setWindowTitle(f"{conversation.title} – Kestrel" if conversation is not None else "Kestrel")
        for action in (self.actions.export_markdown, self.actions.export_json, self.actions.delete_chat):
            action.setEnabled(conversation is not None)
        self.drafts.chat_opened()
        self._show_chat_model()
        self._answer_queue_changed()
        self._show_activity()
        self._update_stack()

    def _show_chat_model(self) -> None:
        """The header names the model this chat uses: its own choice, or the default."""
        rows = self.adapter.installed.rows()
        default = next((row.model.title for row in rows if row.is_default), None)
        if default is None and self.controller.model is not None:
            default = self.controller.model.title
        self.header.set_model(self.controller.conversation_model_id(), default or "none chosen")

    def _answer_queue_changed(self) -> None:
        c = self.controller
        open_now = c.conversation.id if c.conversation is not None else None
        waiting = open_now is not None and open_now in c.waiting_ids
        self.composer.set_streaming(c.open_chat_busy)
        other = self._title_of(c.answering_id) if c.answering_id not in (None, open_now) else ""
        self.composer.set_note(f"Your message waits for the answer in “{other}” to finish. "
                               "Stop (Esc) takes it out of the line; it stays in the chat."
                               if waiting and other else "")
        self.actions.stop.setEnabled(c.open_chat_busy)

    def _title_of(self, conversation_id: int | None) -> str:
        found = self.adapter.conversations.conversation(conversation_id) if conversation_id is not None else None
        return found.title if found is not None else "another chat"

    def _activity_changed(self, text: str, conversation_id: object) -> None:
        self._activity = (text, conversation_id if isinstance(conversation_id, int) else None)
        self._show_activity()

    def _show_activity(self) -> None:
        """The activity names its chat while another chat is open (it is said again on a switch)."""
        text, chat_id = self._activity
        open_now = self.controller.conversation
        if chat_id is not None and (open_now is None or chat_id != open_now.id):
            self.status.set_activity(text, chat_id, self._title_of(chat_id))
        else:
            self.status.set_activity(text)

    def _model_state_changed(self) -> None:
        c = self.controller
        self.status.set_model(c.model_state, c.model_detail)
        shown = c.loaded if c.model_state == ModelState.READY else None
        if shown is None:
            self.status.set_device(None)
        else:
            fell_back = shown.fallback_reasons[0] if shown.fallback_reasons else ""
            self.status.set_device(shown.device, (shown.placement_reason, *shown.fallback_reasons), fell_back)
        if c.model_state == ModelState.FAILED:
            self._show_problem(c.model_detail, "model")
        self._show_chat_model()
        self._update_stack()

    def _update_stack(self) -> None:
        c = self.controller
        no_model = c.model_state in (ModelState.NONE, ModelState.FAILED)
        offer = self.first_run.wanted()
        show_empty = (no_model or offer) and self.adapter.messages.rowCount() == 0
        self.first_run.refresh()
        if c.model_state == ModelState.FAILED:
            self.empty_text.setText("The model could not be loaded. Import another model file, or "
                                    "fix the problem shown above.")
        elif c.model is not None and offer:
            self.empty_text.setText(STARTER_TEXT)
        else:
            self.empty_text.setText("No model yet.\nKestrel runs language models on this computer: "
                                    "import a GGUF model file to begin.")
        self.stack.setCurrentWidget(self.empty if show_empty else self.messages)

    async def _replace_history(self, recover: bool) -> None:
        """The user chose what to do with a damaged history; the controller does it."""
        chosen = self.controller.recover_history() if recover else self.controller.start_fresh_history()
        if not await chosen:
            self.history_panel.set_working(False)  # refused (an answer is running): choose again

    def _show_problem(self, text: str, kind: str = "other") -> None:
        self._problem_kind = kind if text else ""
        self.banner.setText(text)
        self.banner_row.setVisible(bool(text))

    def _problem_solved(self, kind: str) -> None:
        """An engine that failed answers again: its banner has nothing left to say."""
        if kind == self._problem_kind:
            self._show_problem("")

    def focus_search(self) -> None:
        self.search.setFocus()
        self.search.selectAll()

    # --- commands -----------------------------------------------------------------------

    def copy_last_answer(self) -> None:
        for message in reversed(self.adapter.messages.messages()):
            if message.role.value == "assistant":
                QGuiApplication.clipboard().setText(message.text)
                return

    def regenerate(self) -> None:
        self.controller.regenerate()

    def stop_open_chat(self) -> None:
        self.controller.stop()

    def edit_message(self, message_id: int, text: str) -> None:
        dialog = EditMessageDialog(text, self)
        if dialog.exec():
            self.controller.edit_and_resend(message_id, dialog.text())

    def edit_chat_settings(self) -> None:
        system_prompt, settings = self.controller.conversation_settings()
        loaded = self.controller.loaded
        dialog = ConversationSettingsDialog(system_prompt, settings, self,
                                            can_switch_thinking=loaded is None or loaded.thinking_switch)
        if dialog.exec():
            self.adapter.spawn(self.controller.set_conversation_settings(*dialog.values()))

    def header_model_menu(self) -> None:
        self.header.model_button.click()

    def rename_open_chat(self) -> None:
        index = self.conversation_list.currentIndex()
        if index.isValid():
            self.conversation_list.edit(index)

    def delete_open_chat(self) -> None:
        conversation = self.controller.conversation
        if conversation is not None:
            self._delete_chat(conversation.id, conversation.title)

    def _delete_chat(self, conversation_id: int, title: str) -> None:
        if self.confirm(f"Delete “{title}”? This cannot be undone."):
            self.adapter.spawn(self.controller.delete_conversation(conversation_id))

    def delete_current_conversation(self) -> None:
        index = self.conversation_list.currentIndex()
        if index.isValid():
            self._delete_chat(index.data(ConversationRoles.ID), index.data())

    def edit_settings(self) -> None:
        dialog = SettingsDialog(self.controller.settings, self, adapter=self.adapter)
        if dialog.exec():
            self.adapter.spawn(self.controller.update_settings(dialog.value()))

    def choose_theme(self, theme: str) -> None:
        self.adapter.spawn(self.controller.update_settings(dataclasses.replace(self.controller.settings, theme=theme)))

    def set_sidebar_shown(self, shown: bool) -> None:
        self.sidebar.setVisible(shown)

    def _settings_changed(self) -> None:
        # Restyling the app and laying out every visible message again is the slowest
        # thing the UI thread does: only when the theme is what changed.
        if self.controller.settings.theme != self._theme:
            self.apply_theme()

    def apply_theme(self) -> None:
        app = QApplication.instance()
        assert isinstance(app, QApplication)
        self._theme = self.controller.settings.theme
        dark = apply_theme(app, self._theme)
        self.setStyleSheet(window_style(dark))
        self.actions.themes[self._theme].setChecked(True)
        self.messages.delegate.dark = dark
        self.messages.delegate.clear()
        self.messages.viewport().update()

    def _system_colors_changed(self) -> None:
        if self.controller.settings.theme == "system":
            self.apply_theme()

    def bring_to_front(self) -> None:
        """Another launch of Kestrel asked for this window: show it, on top, focused."""
        if self.isMinimized():
            self.showNormal()
        self.show()
        self.raise_()
        self.activateWindow()

    def show_hardware(self) -> None:
        self.adapter.spawn(self._show_hardware())

    async def _show_hardware(self) -> None:
        from app.service.hardware_overview import hardware_overview

        overview = await hardware_overview(self.controller)
        if self.hardware_window is not None:
            self.hardware_window.close()
        self.hardware_window = HardwareWindow(overview, self)
        self.hardware_window.show()
        self.hardware_window.raise_()

    def show_about(self) -> None:
        from app.core.paths import data_paths

        self.about = AboutDialog(data_paths(), self)
        self.about.show()

    def show_model_manager(self) -> None:
        """Open the model manager (not modal: the chat goes on), or bring it forward."""
        if self.model_manager is None:
            self.model_manager = ModelManager(self.adapter, self)
        self.model_manager.show()
        self.model_manager.raise_()
        self.model_manager.activateWindow()

    def choose_model_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import a model file", "", "GGUF models (*.gguf);;All files (*)")
        if path:
            self.adapter.spawn(self.controller.import_model(path))

    def choose_model_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Import an ONNX model folder (with genai_config.json)")
        if path:
            self.adapter.spawn(self.controller.import_model(path))

    def confirm(self, question: str) -> bool:
        answer = QMessageBox.question(self, "Kestrel", question)
        return answer == QMessageBox.StandardButton.Yes

    # --- window events ------------------------------------------------------------------

    def changeEvent(self, event: QEvent) -> None:  # Override QMainWindow.changeEvent.
        if event.type() in (QEvent.Type.WindowStateChange, QEvent.Type.ActivationChange):
            self._window_state_changed()
        super().changeEvent(event)

    def hideEvent(self, event) -> None:  # Override QMainWindow.hideEvent.
        super().hideEvent(event)
        self._window_state_changed()

    def showEvent(self, event) -> None:  # Override QMainWindow.showEvent.
        super().showEvent(event)
        self._window_state_changed()

    def _pace_changed(self, words: str) -> None:
        """The answer being written says it is paused or running gently, not only the status bar."""
        self.messages.delegate.streaming_note = words[:1].lower() + words[1:] if words else "writing…"
        self.messages.viewport().update()

    def _application_state_changed(self, _state: Qt.ApplicationState) -> None:
        self._window_state_changed()

    def _window_state_changed(self) -> None:
        self.controller.set_window_state(window_state(self.isVisible(), self.isMinimized(),
                                                      QGuiApplication.applicationState()))

    def closeEvent(self, event: QCloseEvent) -> None:  # Override QMainWindow.closeEvent.
        self.drafts.flush()
        self.closed.emit()
        super().closeEvent(event)


def window_state(visible: bool, minimized: bool, app_state: Qt.ApplicationState) -> WindowState:
    """The window as the engine's policy sees it. Qt says Hidden or Suspended for an app
    the OS put away (the session locked, on platforms that tell)."""
    if not visible or minimized or app_state in (Qt.ApplicationState.ApplicationHidden,
                                                 Qt.ApplicationState.ApplicationSuspended):
        return WindowState.HIDDEN
    if app_state == Qt.ApplicationState.ApplicationActive:
        return WindowState.FOREGROUND
    return WindowState.BACKGROUND
