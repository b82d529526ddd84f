"""The main window's menus, in the order people expect: File, Edit, View, Chat, Help."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMenu

from app.ui.common import icons
from app.ui.window_commands import WindowCommands

Key = QKeySequence.StandardKey


@dataclass
class WindowActions:
    """The actions other parts of the window enable, check or trigger."""

    export_markdown: QAction
    export_json: QAction
    copy_last: QAction
    regenerate: QAction
    stop: QAction
    delete_chat: QAction
    themes: dict[str, QAction]
    wrap_code: QAction


def _add(menu: QMenu, text: str, slot: Callable[[], object] | Callable[[bool], object],
         shortcut: QKeySequence | QKeySequence.StandardKey | str | None = None, icon: str | None = None) -> QAction:
    action = menu.addAction(text)
    if shortcut is not None:
        action.setShortcut(shortcut if isinstance(shortcut, QKeySequence) else QKeySequence(shortcut))
    if icon is not None:
        icons.themed(action, icon, icons.ROLE.WindowText)
    action.triggered.connect(slot)
    return action


def build_menus(window: WindowCommands, open_logs: Callable[[], object],
                open_memory: Callable[[], object] | None = None, voice_mode: QAction | None = None) -> WindowActions:
    """The menu bar; open_logs: Help → Open logs (the window keeps the log); open_memory: View → Memory…;
    voice_mode: Chat → Voice mode (its control's own action: checked while voice mode is on)."""
    bar = window.menuBar()
    file_menu = bar.addMenu("&File")
    _add(file_menu, "&New chat", window.new_conversation, Key.New, "new-chat")
    _add(file_menu, "New &temporary chat", window.new_temporary_conversation, "Ctrl+Shift+N", "temporary")
    file_menu.addSeparator()
    _add(file_menu, "&Import a chat…", window.chat_files.choose_import, "Ctrl+Shift+I", "import")
    _add(file_menu, "Import a &project…", window.projects.import_project, None, "import")
    export_menu = file_menu.addMenu("&Export this chat")
    icons.themed(export_menu.menuAction(), "export", icons.ROLE.WindowText)
    export_markdown = _add(export_menu, "As &Markdown…", lambda: window.chat_files.choose_export("markdown"),
                           "Ctrl+Shift+E")
    export_json = _add(export_menu, "As &JSON (can be imported)…", lambda: window.chat_files.choose_export("json"))
    file_menu.addSeparator()
    _add(file_menu, "&Models…", window.show_model_manager, "Ctrl+M", "models")
    _add(file_menu, "Import a model &file…", window.choose_model_file, Key.Open)
    _add(file_menu, "Import an ONNX model f&older…", window.choose_model_folder, "Ctrl+Shift+O")
    file_menu.addSeparator()
    _add(file_menu, "&Settings…", window.edit_settings, "Ctrl+,", "settings")
    file_menu.addSeparator()
    _add(file_menu, "&Quit", window.quit, Key.Quit)

    edit_menu = bar.addMenu("&Edit")
    copy_last = _add(edit_menu, "&Copy last answer", window.copy_last_answer, "Ctrl+Shift+C", "copy")
    edit_menu.addSeparator()
    _add(edit_menu, "&Find chats", window.focus_search, Key.Find, "search")
    _add(edit_menu, "&Message box", window.composer.edit.setFocus, "Ctrl+L")

    view_menu = bar.addMenu("&View")
    sidebar = _add(view_menu, "&Chat list", window.set_sidebar_shown, "Ctrl+Shift+L")
    sidebar.setCheckable(True)
    sidebar.setChecked(True)
    theme_menu = view_menu.addMenu("&Theme")
    group = QActionGroup(window)
    themes = {}
    for value, text in (("system", "Follow the &system"), ("light", "&Light"), ("dark", "&Dark")):
        action = theme_menu.addAction(text)
        action.setCheckable(True)
        action.setActionGroup(group)
        action.triggered.connect(lambda _checked=False, chosen=value: window.choose_theme(chosen))
        themes[value] = action
    wrap_code = _add(view_menu, "&Wrap long code lines", lambda checked: _choose_code_wrap(window, checked))
    wrap_code.setObjectName("wrapCode")
    wrap_code.setCheckable(True)
    _follow_code_wrap(window, wrap_code)
    window.adapter.settingsChanged.connect(lambda: _follow_code_wrap(window, wrap_code))
    view_menu.addSeparator()
    _add(view_menu, "&Hardware…", window.show_hardware, "Ctrl+Shift+H", "hardware")
    _add(view_menu, "&API server…", window.show_server_window, None, "server")
    documents = _add(view_menu, "&Documents…", window.show_documents_window, "Ctrl+Shift+D", "folder")
    documents.setObjectName("showDocuments")  # other parts (the composer's "Manage documents…") trigger it
    if open_memory is not None:
        _add(view_menu, "&Memory…", open_memory).setObjectName("showMemory")

    chat_menu = bar.addMenu("&Chat")
    regenerate = _add(chat_menu, "&Regenerate last answer", window.regenerate, "Ctrl+R", "regenerate")
    stop = _add(chat_menu, "&Stop the answer", window.stop_open_chat, None, "stop")
    # The list's current answer (else the last) read aloud, or the reading stopped (app/ui/voice/read_aloud_control.py).
    _add(chat_menu, "Read &aloud / stop reading", window.read_aloud.press_current, "Ctrl+Shift+A", "read-aloud")
    if voice_mode is not None:  # a spoken conversation (app/ui/voice/voice_mode_control.py)
        chat_menu.addAction(voice_mode)
    chat_menu.addSeparator()
    # Ctrl+. next to Settings' Ctrl+, : Ctrl+Shift+, never fires where Shift+, types "<".
    _add(chat_menu, "Chat se&ttings…", window.edit_chat_settings, "Ctrl+.", "chat-settings")
    _add(chat_menu, "Choose the &model for this chat…", window.header_model_menu, "Ctrl+Shift+M", "model")
    chat_menu.addSeparator()
    _add(chat_menu, "Re&name chat", window.rename_open_chat)
    delete_chat = _add(chat_menu, "&Delete chat…", window.delete_open_chat, None, "delete")

    help_menu = bar.addMenu("&Help")
    _add(help_menu, "Open &logs", open_logs, None, "folder").setObjectName("openLogs")
    help_menu.addSeparator()
    _add(help_menu, "&About Kestrel", window.show_about, None, "info")
    _follow_chat_kind(window)
    return WindowActions(export_markdown=export_markdown, export_json=export_json, copy_last=copy_last,
                         regenerate=regenerate, stop=stop, delete_chat=delete_chat, themes=themes,
                         wrap_code=wrap_code)


def _follow_chat_kind(window: WindowCommands) -> None:
    """The commands the menus share with the sidebar's New chat menu and the messages' Remember, and the
    window following whether the open chat is temporary (the Remember it offers, the words it shows)."""
    window.sidebar.temporaryChatRequested.connect(window.new_temporary_conversation)
    window.chat.messages.rememberRequested.connect(window.remember_from)
    window.adapter.conversationOpened.connect(window.follow_temporary)
    window.adapter.settingsChanged.connect(window.follow_temporary)
    window.follow_temporary()


def _choose_code_wrap(window: WindowCommands, wrap: bool) -> None:
    """View → Wrap long code lines: shown at once, and kept in the settings for the next start."""
    window.chat.messages.delegate.set_wrap_code(wrap)
    door = window.doors.settings
    window.adapter.spawn(door.update_settings(dataclasses.replace(door.settings, wrap_code=wrap)))


def _follow_code_wrap(window: WindowCommands, action: QAction) -> None:
    """The settings were read or changed: the toggle and the chat's code blocks follow them."""
    wrap = window.doors.settings.settings.wrap_code
    action.setChecked(wrap)
    window.chat.messages.delegate.set_wrap_code(wrap)
