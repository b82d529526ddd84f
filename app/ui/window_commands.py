"""The window's commands: what its menus, buttons and shortcuts do (a part of MainWindow)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QFileDialog, QListView, QMainWindow, QMessageBox

from app.core.conversation import Message
from app.core.generation import GenerationSettings
from app.core.store.history_errors import HistoryError
from app.service.models.engine_errors import EngineError
from app.ui.about import AboutDialog
from app.ui.settings.dialogs import ConversationSettingsDialog, EditMessageDialog, SettingsDialog
from app.ui.documents.documents_window import DocumentsWindow
from app.ui.models.hardware_view import HardwareWindow
from app.ui.models.model_manager import ModelManager
from app.ui.server.server_window import ServerWindow
from app.ui.messages.message_actions import EVERY_ACTION, WITHOUT_REMEMBER, offered_with
from app.ui.messages.remember_dialog import RememberDialog
from app.ui.messages.tool_parts import message_markdown

if TYPE_CHECKING:
    from app.core.paths import DataPaths
    from app.service.doors.window import WindowDoors
    from app.ui.state.adapter import ServiceAdapter
    from app.ui.chat.chat_files import ChatFiles
    from app.ui.projects.projects_host import ProjectsHost
    from app.ui.chat.chat_header import ChatHeader
    from app.ui.chat.chat_pane import ChatPane
    from app.ui.chat.composer import Composer
    from app.ui.server.server_host import ServerHost
    from app.ui.chat.sidebar import Sidebar
    from app.ui.memory.memory_host import MemoryHost
    from app.ui.voice.read_aloud_control import ReadAloudControl


_BUSY_WORDS = ("This chat's answer is being written or waits its turn: stop it (Esc) or let it finish, "
               "then try again.")


class WindowCommands(QMainWindow):
    """Dialogs and actions the user starts; MainWindow inherits them and does the wiring.

    Opens the model manager (`model_manager`), the hardware window (`hardware_window`),
    the API server window (`server_window`), the Documents window (`documents_window`)
    and About (`about`) without blocking the chat; asks before deleting.
    """

    doors: "WindowDoors"
    adapter: "ServiceAdapter"
    header: "ChatHeader"
    sidebar: "Sidebar"
    conversation_list: "QListView"
    chat: "ChatPane"
    composer: "Composer"
    chat_files: "ChatFiles"
    model_manager: ModelManager | None
    hardware_window: HardwareWindow | None
    about: AboutDialog | None
    server_window: ServerWindow | None
    documents_window: DocumentsWindow | None = None
    remember_dialog: RememberDialog | None = None  # the last one opened (the tests reach it here)
    server: "ServerHost"
    memory: "MemoryHost"
    read_aloud: "ReadAloudControl"
    projects: "ProjectsHost"
    paths: "DataPaths"
    quitting = False  # quit() was asked: closing ends Kestrel even where it would hide to the tray
    # Quick ask's shortcut: whether it is Kestrel's and its words (set_shortcut_held), for Settings → Quick ask.
    shortcutStatusChanged = Signal(bool, str)
    shortcut_held: bool
    shortcut_words: str

    def quit(self) -> None:
        """End Kestrel (File → Quit, the tray's Quit, Ctrl+C), even where closing would only hide the window."""
        self.quitting = True
        self.close()

    def new_conversation(self) -> None:
        if not self.projects.new_chat_in_chosen():  # a project chosen in the chat list: a chat in it
            self.doors.chat.new_conversation()
        self.composer.edit.setFocus()

    def new_temporary_conversation(self) -> None:
        """A chat kept in memory only, with no memory: the sidebar and the empty chat say so (follow_temporary)."""
        self.adapter.spawn(self.doors.chat.new_temporary_conversation())
        self.composer.edit.setFocus()

    def follow_temporary(self) -> None:
        """Another chat opened or the settings changed: whether the open chat is temporary is shown, and
        Remember is offered only where something may be remembered (memory on, the chat not temporary)."""
        temporary = self.doors.chat.temporary
        self.sidebar.show_temporary(temporary)
        self.chat.messages.set_temporary(temporary)
        remembers = self.doors.settings.settings.memory.enabled and not temporary
        delegate = self.chat.messages.delegate
        offered = EVERY_ACTION if remembers else WITHOUT_REMEMBER
        if delegate.offered != offered:
            delegate.offered = offered_with(offered, delegate.offered)  # the answers' speaker stays
            self.chat.messages.viewport().update()

    def remember_from(self, message: Message, text: str) -> None:
        """A message's Remember: the person edits its text (or the part selected) down to a fact to keep."""
        if self.doors.chat.is_temporary(message.conversation_id):
            return  # never offered there; a key pressed as the chat changed does nothing
        dialog = RememberDialog(text, message.conversation_id, self.doors.memory, self.adapter.spawn, self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.remember_dialog = dialog
        dialog.open()

    def focus_search(self) -> None:
        self.sidebar.search.setFocus()
        self.sidebar.search.selectAll()

    def copy_last_answer(self) -> None:
        for message in reversed(self.adapter.messages.messages()):
            if message.role.value == "assistant":
                QGuiApplication.clipboard().setText(message_markdown(message))
                return

    def regenerate(self) -> None:
        if not self.doors.chat.regenerate():
            self.chat.show_problem(_BUSY_WORDS if self.doors.chat.open_chat_busy
                                   else "There is no answer in this chat to write again yet.")

    def stop_open_chat(self) -> None:
        self.doors.chat.stop()

    def edit_message(self, message_id: int, text: str) -> None:
        if self.doors.chat.open_chat_busy:
            self.chat.show_problem(_BUSY_WORDS)  # asked before the dialog: no edit is typed in vain
            return
        dialog = EditMessageDialog(text, self)
        if dialog.exec() and not self.doors.chat.edit_and_resend(message_id, dialog.text()):
            # The chat got busy meanwhile: the edit is kept in the message box, not lost.
            self.composer.edit.setPlainText(dialog.text())
            self.chat.show_problem(_BUSY_WORDS + " Your edit is in the message box.")

    def edit_chat_settings(self) -> None:
        system_prompt, settings = self.doors.chat.conversation_settings()
        loaded = self.doors.model.loaded
        conversation = self.doors.chat.conversation
        dialog = ConversationSettingsDialog(system_prompt, settings, self,
                                            can_switch_thinking=loaded is None or loaded.thinking_switch,
                                            always_thinks=loaded is not None and loaded.thinks,
                                            servers=[server.name for server in self.doors.tools.servers()],
                                            uses_memory=conversation is None or conversation.memory,
                                            memory_on=self.doors.settings.settings.memory.enabled
                                            and not self.doors.chat.temporary)
        if dialog.exec():
            self.adapter.spawn(self._save_chat_settings(*dialog.values(), dialog.uses_memory()))

    async def _save_chat_settings(self, system_prompt: str, settings: GenerationSettings, memory: bool) -> None:
        """The chat's settings, then (once it is saved: a new chat is saved by its first settings) its memory switch."""
        chat = self.doors.chat
        if not await chat.set_conversation_settings(system_prompt, settings):
            return  # the history refused; said already
        conversation = chat.conversation
        if conversation is not None and conversation.memory != memory:
            try:
                await self.doors.memory.set_chat_memory(conversation.id, memory)
            except HistoryError as exc:
                self.chat.show_problem(str(exc), "history")
            except KeyError:
                pass  # deleted meanwhile

    def header_model_menu(self) -> None:
        self.header.model_button.click()

    def rename_open_chat(self) -> None:
        index = self.conversation_list.currentIndex()
        if index.isValid():
            self.conversation_list.edit(index)

    def delete_open_chat(self) -> None:
        conversation = self.doors.chat.conversation
        if conversation is not None and self.doors.chat.is_temporary(conversation.id):
            self.new_conversation()  # leaving it deletes it: nothing kept to ask about
        elif conversation is not None:
            self._delete_chat(conversation.id, conversation.title)

    def _delete_chat(self, conversation_id: int, title: str) -> None:
        if self.confirm(f"Delete “{title}”? This cannot be undone."):
            self.adapter.spawn(self.doors.chat.delete_conversation(conversation_id))

    def edit_settings(self, page: str = "") -> None:
        """The Settings dialog (page "server": open on the API server's page)."""
        dialog = SettingsDialog(self.doors.settings.settings, self, adapter=self.adapter, model=self.doors.model,
                                tools=self.doors.tools, mcp_file=self.paths.mcp_file,
                                show_memory=self.memory.show_window, microphones=self.doors.voice.microphones)
        dialog.voice.use_speakers(self.doors.read_aloud.speakers)  # read with the microphones, on a thread
        dialog.voice.use_speech_choices(self.doors.library.speech_usable)
        self.adapter.toolServersChanged.connect(dialog.tools.set_statuses)
        dialog.show_page(page)
        if self.shortcut_words:  # what quick ask's shortcut is doing, then as it changes while the dialog is open
            dialog.quick_ask.show_shortcut_status(self.shortcut_held, self.shortcut_words)
        self.shortcutStatusChanged.connect(dialog.quick_ask.show_shortcut_status)
        if dialog.exec():
            dialog.save_tools()
            self.adapter.spawn(self.doors.settings.update_settings(dialog.value_with_tools()))

    def choose_theme(self, theme: str) -> None:
        settings = self.doors.settings
        self.adapter.spawn(settings.update_settings(dataclasses.replace(settings.settings, theme=theme)))

    def set_sidebar_shown(self, shown: bool) -> None:
        self.sidebar.setVisible(shown)

    def show_hardware(self) -> None:
        self.adapter.spawn(self._show_hardware())

    async def _show_hardware(self) -> None:
        try:
            overview = await self.doors.model.hardware_overview()
        except EngineError as exc:
            self.chat.show_problem(f"The hardware report could not be made: {exc} Try again once a model "
                                   "has loaded.", "engine")
            return
        if self.hardware_window is not None:
            self.hardware_window.close()
        self.hardware_window = HardwareWindow(overview, self)
        self.hardware_window.show()
        self.hardware_window.raise_()

    def show_about(self) -> None:
        """About Kestrel, for this window's data folders; one at a time."""
        if self.about is None:
            self.about = AboutDialog(self.paths, self)
            self.adapter.speechListed.connect(self.about.set_speech_rows)
        self.adapter.spawn(self.doors.library.speech_refresh())  # the downloaded voices' licences, listed anew
        self.about.show()
        self.about.raise_()

    def show_server_window(self) -> None:
        """The API server's state, address, key and requests (not modal); one at a time."""
        if self.server_window is None:
            self.server_window = ServerWindow(self.adapter, self.doors.settings, self.doors.api, self.server, self)
            self.server_window.settingsRequested.connect(lambda: self.edit_settings("server"))
        self.server_window.show()
        self.server_window.raise_()
        self.server_window.activateWindow()

    def show_documents_window(self) -> None:
        """The document collections chats search, their indexing and files (not modal); one at a time.
        Each opening looks for changed files too (sizes and times: cheap), so what it shows is now's,
        and lists the models and the catalog (its embedding line offers and picks among them)."""
        documents = self.doors.documents
        documents.rescan()
        self.adapter.spawn(documents.list_models())
        if self.documents_window is None:
            self.documents_window = DocumentsWindow(self.adapter, documents, self)
            self.documents_window.modelsRequested.connect(self.show_model_manager)
        self.documents_window.show()
        self.documents_window.raise_()
        self.documents_window.activateWindow()

    def show_model_manager(self) -> None:
        """Open the model manager (not modal: the chat goes on), or bring it forward."""
        if self.model_manager is None:
            self.model_manager = ModelManager(self.adapter, self.doors.library, self.doors.settings, self,
                                              model=self.doors.model, servers=self.doors.servers)
        self.model_manager.show()
        self.model_manager.raise_()
        self.model_manager.activateWindow()

    def choose_model_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import a model file", "", "GGUF models (*.gguf);;All files (*)")
        if path:
            self.adapter.spawn(self.doors.library.add(path, reference=False, load=True))

    def choose_model_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Import an ONNX model folder (with genai_config.json)")
        if path:
            self.adapter.spawn(self.doors.library.add(path, reference=False, load=True))

    def confirm(self, question: str) -> bool:
        answer = QMessageBox.question(self, "Kestrel", question)
        return answer == QMessageBox.StandardButton.Yes
