"""MainWindow: conversations on the left, the chat on the right, the engine in the status bar."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (QAbstractItemView, QFileDialog, QHBoxLayout, QLabel, QLineEdit,
                               QApplication, QListView, QMainWindow, QMessageBox, QProgressBar, QPushButton,
                               QSplitter, QStackedWidget, QToolButton, QVBoxLayout, QWidget)

from app.ui.composer import Composer
from app.ui.conversation_model import ConversationFilter, ConversationRoles
from app.ui.dialogs import (ConversationSettingsDialog, DamagedHistoryPanel, EditMessageDialog, HardwareDialog,
                            SettingsDialog)
from app.service.controller import ChatController
from app.service.background import WindowState
from app.service.events import ModelState
from app.ui.adapter import ControllerAdapter
from app.ui.first_run import STARTER_TEXT, FirstRunOffer
from app.ui.model_manager import ClickableLabel, ModelManager
from app.ui.message_view import MessageView
from app.ui.theme import apply_theme

# Typing in the search box waits this long for a pause before the history is searched.
SEARCH_DEBOUNCE_MS = 200


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
        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(SEARCH_DEBOUNCE_MS)
        self._searches = 0
        self._theme: str | None = None
        self.model_manager: ModelManager | None = None
        self.setWindowTitle("Kestrel")
        self.resize(1100, 740)
        self._build_sidebar()
        self._build_chat()
        splitter = QSplitter(self)
        splitter.addWidget(self.sidebar)
        splitter.addWidget(self.chat)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([260, 840])
        self.setCentralWidget(splitter)
        self._build_status_bar()
        self._build_actions()
        self._connect()
        self._model_state_changed()
        self._conversation_opened()
        self._set_tab_order()
        self.composer.edit.setFocus()

    # --- building ---------------------------------------------------------------------

    def _build_sidebar(self) -> None:
        self.sidebar = QWidget(self)
        self.new_button = QPushButton("New chat", self.sidebar)
        self.search = QLineEdit(self.sidebar)
        self.search.setPlaceholderText("Search chats (Ctrl+F)")
        self.search.setClearButtonEnabled(True)
        self.search.setAccessibleName("Search chats")
        self.filter = ConversationFilter(self)
        self.filter.setSourceModel(self.adapter.conversations)
        self.conversation_list = QListView(self.sidebar)
        self.conversation_list.setObjectName("conversations")
        self.conversation_list.setAccessibleName("Chats")
        self.conversation_list.setModel(self.filter)
        self.conversation_list.setEditTriggers(QAbstractItemView.EditTrigger.EditKeyPressed
                                               | QAbstractItemView.EditTrigger.DoubleClicked)
        self.conversation_list.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        layout = QVBoxLayout(self.sidebar)
        layout.setContentsMargins(8, 8, 4, 8)
        layout.addWidget(self.new_button)
        layout.addWidget(self.search)
        layout.addWidget(self.conversation_list, 1)

    def _build_chat(self) -> None:
        self.chat = QWidget(self)
        self.banner = QLabel(self.chat)
        self.banner.setObjectName("banner")
        self.banner.setWordWrap(True)
        self.banner.setStyleSheet("QLabel#banner{background:#b3261e;color:white;padding:8px;border-radius:6px}")
        self.banner_close = QToolButton(self.chat)
        self.banner_close.setText("Dismiss")
        banner_row = QHBoxLayout()
        banner_row.addWidget(self.banner, 1)
        banner_row.addWidget(self.banner_close)
        self.history_panel = DamagedHistoryPanel(self.chat)
        self.messages = MessageView(self.chat)
        self.messages.setModel(self.adapter.messages)
        self.empty = self._build_empty_state()
        self.stack = QStackedWidget(self.chat)
        self.stack.addWidget(self.messages)
        self.stack.addWidget(self.empty)
        self.settings_button = QToolButton(self.chat)
        self.settings_button.setText("Chat settings…")
        header = QHBoxLayout()
        self.title = QLabel(self.chat)
        self.title.setObjectName("chatTitle")
        header.addWidget(self.title, 1)
        header.addWidget(self.settings_button)
        self.composer = Composer(self.chat)
        layout = QVBoxLayout(self.chat)
        layout.setContentsMargins(4, 8, 8, 0)
        layout.addLayout(header)
        layout.addLayout(banner_row)
        layout.addWidget(self.history_panel)
        layout.addWidget(self.stack, 1)
        layout.addWidget(self.composer)
        self._show_problem("")

    def _build_empty_state(self) -> QWidget:
        panel = QWidget(self.chat)
        self.empty_text = QLabel(panel)
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

    def _build_status_bar(self) -> None:
        bar = self.statusBar()
        self.model_label = ClickableLabel(self)
        self.model_label.setToolTip("Open the model manager (Ctrl+M)")
        self.device_label = QLabel(self)
        self.activity_label = QLabel("Idle", self)
        self.progress = QProgressBar(self)
        self.progress.setMaximumWidth(220)
        self.cancel_setup = QToolButton(self)
        self.cancel_setup.setText("Cancel")
        for widget in (self.model_label, self.device_label):
            bar.addWidget(widget)
        bar.addWidget(self.activity_label, 1)
        bar.addPermanentWidget(self.progress)
        bar.addPermanentWidget(self.cancel_setup)
        self.progress.hide()
        self.cancel_setup.hide()

    def _build_actions(self) -> None:
        chat_menu = self.menuBar().addMenu("&Chat")
        file_menu = self.menuBar().addMenu("&File")
        self.action_new = self._action(chat_menu, "&New chat", QKeySequence.StandardKey.New, self.new_conversation)
        self._action(chat_menu, "&Search chats", QKeySequence.StandardKey.Find, self._focus_search)
        self.action_copy_last = self._action(chat_menu, "&Copy last answer", QKeySequence("Ctrl+Shift+C"), self.copy_last_answer)
        self._action(chat_menu, "&Regenerate last answer", QKeySequence("Ctrl+R"), self.controller.regenerate)
        self._action(chat_menu, "Chat se&ttings…", QKeySequence("Ctrl+Shift+,"), self.edit_chat_settings)
        self._action(chat_menu, "&Message box", QKeySequence("Ctrl+L"), self.composer.edit.setFocus)
        self._action(file_menu, "&Models…", QKeySequence("Ctrl+M"), self.show_model_manager)
        self._action(file_menu, "&Import a model file…", QKeySequence("Ctrl+O"), self.choose_model_file)
        self._action(file_menu, "Import an ONNX model &folder…", QKeySequence("Ctrl+Shift+O"),
                     self.choose_model_folder)
        self._action(file_menu, "&Settings…", QKeySequence("Ctrl+,"), self.edit_settings)
        self._action(file_menu, "&Hardware…", QKeySequence("Ctrl+Shift+H"), self.show_hardware)
        self._action(file_menu, "&Quit", QKeySequence.StandardKey.Quit, self.close)
        rename = QAction("Rename", self.conversation_list)
        rename.triggered.connect(lambda: self.conversation_list.edit(self.conversation_list.currentIndex()))
        delete = QAction("Delete…", self.conversation_list)
        delete.setShortcut(QKeySequence.StandardKey.Delete)
        delete.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        delete.triggered.connect(self.delete_current_conversation)
        self.conversation_list.addActions([rename, delete])

    def _set_tab_order(self) -> None:
        """Keyboard users move chats → messages → composer → send, in reading order."""
        chain = [self.new_button, self.search, self.conversation_list, self.settings_button,
                 self.messages, self.composer.edit, self.composer.button]
        for first, second in zip(chain, chain[1:]):
            QWidget.setTabOrder(first, second)

    def _action(self, menu, text: str, shortcut, slot) -> QAction:
        action = menu.addAction(text)
        action.setShortcut(shortcut)
        action.triggered.connect(slot)
        return action

    def _connect(self) -> None:
        s, c = self.adapter, self.controller
        self.new_button.clicked.connect(self.new_conversation)
        self.search.textChanged.connect(lambda: self._search_timer.start())
        self._search_timer.timeout.connect(self.run_search)
        self.conversation_list.activated.connect(self._open_index)
        self.conversation_list.clicked.connect(self._open_index)
        self.composer.sendRequested.connect(self._send)
        self.composer.stopRequested.connect(c.stop)
        self.messages.regenerateRequested.connect(c.regenerate)
        self.messages.editRequested.connect(self.edit_message)
        self.settings_button.clicked.connect(self.edit_chat_settings)
        self.import_button.clicked.connect(self.choose_model_file)
        self.model_label.clicked.connect(self.show_model_manager)
        self.first_run.follow(self.adapter)
        self.first_run.managerRequested.connect(self.show_model_manager)
        self.banner_close.clicked.connect(lambda: self._show_problem(""))
        self.cancel_setup.clicked.connect(c.setup.cancel)
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._system_colors_changed)
        app = QGuiApplication.instance()
        if isinstance(app, QGuiApplication):
            # A bound method: Qt drops the connection when the window is destroyed.
            app.applicationStateChanged.connect(self._application_state_changed)
        s.problem.connect(self._show_problem)
        s.busyChanged.connect(self.composer.set_streaming)
        s.activityChanged.connect(self.activity_label.setText)
        s.paceChanged.connect(self._pace_changed)
        s.modelStateChanged.connect(self._model_state_changed)
        s.conversationOpened.connect(self._conversation_opened)
        s.settingsChanged.connect(self._settings_changed)
        s.setupProgress.connect(self._setup_progress)
        s.setupFinished.connect(self._setup_finished)
        s.historyDamaged.connect(self.history_panel.show_found)
        s.historyReplaced.connect(self.history_panel.show_done)
        self.history_panel.recoverRequested.connect(lambda: self.adapter.spawn(self._replace_history(True)))
        self.history_panel.freshRequested.connect(lambda: self.adapter.spawn(self._replace_history(False)))

    # --- reacting ---------------------------------------------------------------------

    def _send(self, text: str) -> None:
        if self.controller.send(text):
            self.composer.edit.clear()
            self.messages.scroll_to_end()

    def new_conversation(self) -> None:
        self.controller.new_conversation()

    def _open_index(self, index) -> None:
        conversation_id = index.data(ConversationRoles.ID)
        open_now = self.controller.conversation
        if conversation_id is not None and (open_now is None or conversation_id != open_now.id):
            self.adapter.spawn(self.controller.open_conversation(conversation_id))

    def run_search(self) -> None:
        """Search the history off the UI thread; a later search makes this one's answer moot."""
        self._search_timer.stop()
        self._searches += 1
        self.adapter.spawn(self._search(self.search.text(), self._searches))

    async def _search(self, query: str, number: int) -> None:
        matches = await self.controller.search(query)
        if number == self._searches:
            self.filter.set_matches(matches)

    def _conversation_opened(self) -> None:
        conversation = self.controller.conversation
        title = "New chat"
        if conversation is not None:
            title = conversation.title
            row = self.adapter.conversations.row_of(conversation.id)
            if row is not None:
                index = self.filter.mapFromSource(self.adapter.conversations.index(row))
                if index.isValid():
                    self.conversation_list.setCurrentIndex(index)
        else:
            self.conversation_list.clearSelection()
        self.title.setText(f"<b>{_escape(title)}</b>")
        self._update_stack()

    def _model_state_changed(self) -> None:
        s = self.controller
        loaded = s.loaded
        state = s.model_state
        self.model_label.setText({ModelState.READY: f"Model: {s.model_detail}",
                                  ModelState.LOADING: s.model_detail,
                                  ModelState.INSTALLING: s.model_detail,
                                  ModelState.FAILED: "Model failed to load",
                                  ModelState.UNLOADED: s.model_detail,
                                  ModelState.NONE: "No model"}[state])
        shown = loaded if state == ModelState.READY else None
        device = f"Device: {shown.device}" if shown else "Device: —"
        if shown and shown.fallback_reasons:
            # A fall-back is never silent: the reason is on screen, in full on hover.
            device += f" (fell back: {_shorten(shown.fallback_reasons[0], 90)})"
        self.device_label.setText(device)
        self.device_label.setToolTip("\n".join([shown.placement_reason, *shown.fallback_reasons]) if shown else "")
        if state == ModelState.FAILED:
            self._show_problem(s.model_detail)
        self._update_stack()

    def _update_stack(self) -> None:
        s = self.controller
        no_model = s.model_state in (ModelState.NONE, ModelState.FAILED)
        offer = self.first_run.wanted()
        show_empty = (no_model or offer) and self.adapter.messages.rowCount() == 0
        self.first_run.refresh()
        if s.model_state == ModelState.FAILED:
            self.empty_text.setText("The model could not be loaded. Import another model file, or "
                                    "fix the problem shown above.")
        elif s.model is not None and offer:
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

    def _setup_finished(self) -> None:
        self.progress.hide()
        self.cancel_setup.hide()

    def _setup_progress(self, what: str, done: int, total: int) -> None:
        self.progress.show()
        self.cancel_setup.show()
        if total <= 0:  # no measure of progress (waiting for another Kestrel): a busy bar
            self.progress.setFormat(what)
            self.progress.setMaximum(0)
            return
        self.progress.setFormat(f"{what}: %p%")
        self.progress.setMaximum(1000)
        self.progress.setValue(int(done * 1000 / max(total, 1)))

    def _show_problem(self, text: str) -> None:
        self.banner.setText(text)
        self.banner.setVisible(bool(text))
        self.banner_close.setVisible(bool(text))

    def _focus_search(self) -> None:
        self.search.setFocus()
        self.search.selectAll()

    # --- commands -----------------------------------------------------------------------

    def copy_last_answer(self) -> None:
        for message in reversed(self.adapter.messages.messages()):
            if message.role.value == "assistant":
                QGuiApplication.clipboard().setText(message.text)
                return

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

    def edit_settings(self) -> None:
        dialog = SettingsDialog(self.controller.settings, self, adapter=self.adapter)
        if dialog.exec():
            self.adapter.spawn(self.controller.update_settings(dialog.value()))

    def _settings_changed(self) -> None:
        # Restyling the app and laying out every visible message again is the slowest
        # thing the UI thread does: only when the theme is what changed.
        if self.controller.settings.theme != self._theme:
            self.apply_theme()

    def bring_to_front(self) -> None:
        """Another launch of Kestrel asked for this window: show it, on top, focused."""
        if self.isMinimized():
            self.showNormal()
        self.show()
        self.raise_()
        self.activateWindow()

    def apply_theme(self) -> None:
        app = QApplication.instance()
        assert isinstance(app, QApplication)
        self._theme = self.controller.settings.theme
        self.messages.delegate.dark = apply_theme(app, self._theme)
        self.messages.delegate.clear()
        self.messages.viewport().update()

    def _system_colors_changed(self) -> None:
        if self.controller.settings.theme == "system":
            self.apply_theme()

    def show_hardware(self) -> None:
        self.adapter.spawn(self._show_hardware())

    async def _show_hardware(self) -> None:
        self.hardware_dialog = HardwareDialog(await self.controller.hardware_text(), self)
        self.hardware_dialog.show()

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

    def delete_current_conversation(self) -> None:
        index = self.conversation_list.currentIndex()
        conversation_id = index.data(ConversationRoles.ID)
        if conversation_id is not None and self.confirm(f"Delete “{index.data()}”? This cannot be undone."):
            self.adapter.spawn(self.controller.delete_conversation(conversation_id))

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


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
