"""The chat's header: its title, the model picker for this chat, and the chat-settings button."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from PySide6.QtCore import QRect, QSize, Qt, Signal
from PySide6.QtGui import QAction, QActionGroup, QFont, QIcon, QPaintEvent, QPalette, QResizeEvent
from PySide6.QtWidgets import (QHBoxLayout, QLabel, QMenu, QSizePolicy, QStyle, QStyleOptionToolButton,
                               QStylePainter, QToolButton, QWidget)

from app.library.servers.records import RemoteModel, split_model_id
from app.ui.common import icons
from app.ui.common.text_room import FULL_TEXT
from app.ui.state.model_items import InstalledModelsModel, Roles

# The picker's button shows at least this much of a model's name, however narrow the header.
MODEL_BUTTON_MIN = 120


class ElidedLabel(QLabel):
    """A one-line label that shows "…" instead of growing past its room; the whole text is its tooltip then."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setTextFormat(Qt.TextFormat.PlainText)

    def full_text(self) -> str:
        return self._full

    def set_full_text(self, text: str) -> None:
        self._full = " ".join(text.split())
        self.setAccessibleName(self._full)
        self._elide()

    def minimumSizeHint(self) -> QSize:  # Override QLabel: any width will do, the text elides.
        return QSize(0, super().minimumSizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:  # Override QLabel.resizeEvent.
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        shown = self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, max(self.width(), 0))
        self.setText(shown)
        self.setToolTip(self._full if shown != self._full else "")


class PickerButton(QToolButton):
    """A flat button whose text is followed by a caret, as choosers in chat apps look.

    Its menu is not set on it (Qt would draw its own small arrow in the corner): a click
    pops `menu` up below it, so Space and Enter open it too.
    """

    CARET, SPACE = 12, 2

    def __init__(self, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.menu_ = QMenu(title, self)
        self.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.setAutoRaise(True)
        self.clicked.connect(self.open_menu)

    def open_menu(self) -> None:
        self.menu_.popup(self.mapToGlobal(self.rect().bottomLeft()))

    def sizeHint(self) -> QSize:  # Override QToolButton: room for the caret.
        base = super().sizeHint()
        return QSize(base.width() + self.CARET + self.SPACE, base.height())

    def paintEvent(self, event: QPaintEvent) -> None:  # Override QToolButton.paintEvent.
        painter = QStylePainter(self)
        option = QStyleOptionToolButton()
        self.initStyleOption(option)
        panel = QStyleOptionToolButton(option)
        panel.text, panel.icon = "", QIcon()
        painter.drawComplexControl(QStyle.ComplexControl.CC_ToolButton, panel)
        option.rect = option.rect.adjusted(0, 0, -(self.CARET + self.SPACE), 0)
        painter.drawControl(QStyle.ControlElement.CE_ToolButtonLabel, option)
        caret = QRect(option.rect.right() - 5, (self.height() - self.CARET) // 2, self.CARET, self.CARET)
        role = QPalette.ColorRole.ButtonText if self.isEnabled() else QPalette.ColorRole.PlaceholderText
        color = self.palette().color(role)
        painter.drawPixmap(caret, icons.pixmap("down", self.CARET, color, self.devicePixelRatioF()))


class ListsInstalledModels(Protocol):
    """What the header needs of the ServiceAdapter."""

    installed: InstalledModelsModel


class ChatHeader(QWidget):
    """Title, model picker and chat settings above the messages.

    Signals: modelChosen(model id, or None for the default model), managerRequested()
    ("Manage models…"), settingsRequested() (the chat-settings button). The picker's menu
    lists adapter.installed and is rebuilt whenever that model changes; after them, the models
    of the servers the person added (set_remote_models), each "MODEL on SERVER", its id
    SERVER/MODEL. Attributes: title, model_button (its menu: model_menu), settings_button.
    """

    modelChosen = Signal(object)
    managerRequested = Signal()
    settingsRequested = Signal()

    def __init__(self, adapter: ListsInstalledModels, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._installed: InstalledModelsModel = adapter.installed
        self._model_id: str | None = None
        self._default_name = ""
        self._remote: tuple[RemoteModel, ...] = ()
        self._servers_said: dict[str, str] = {}  # by server: "asking…" or why it listed nothing
        self._server_gone = False  # the chat's own model is on a server no longer added
        self._group = QActionGroup(self)
        self.title = ElidedLabel(self)
        self.title.setObjectName("chatTitle")
        font = QFont(self.title.font())
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.25)
        self.title.setFont(font)
        self.model_button = PickerButton("Model", self)
        self.model_button.setObjectName("modelPicker")
        self.model_button.setAccessibleName("Model for this chat")
        self.model_button.setToolTip("The model this chat answers with")
        icons.themed(self.model_button, "model")
        self.model_menu = self.model_button.menu_
        self.settings_button = QToolButton(self)
        self.settings_button.setAutoRaise(True)
        self.settings_button.setToolTip("Chat settings (Ctrl+.)")
        self.settings_button.setAccessibleName("Chat settings")
        icons.themed(self.settings_button, "chat-settings")
        layout = self._layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 6, 8, 6)
        layout.setSpacing(8)
        layout.addWidget(self.title, 1)
        layout.addWidget(self.model_button)
        layout.addWidget(self.settings_button)
        self.settings_button.clicked.connect(self.settingsRequested)
        for signal in (self._installed.rowsInserted, self._installed.rowsRemoved, self._installed.rowsMoved,
                       self._installed.modelReset, self._installed.dataChanged):
            signal.connect(self._refresh)
        self._refresh()

    # --- what the window calls --------------------------------------------------------

    def set_title(self, title: str) -> None:
        self.title.set_full_text(title)
        self._show_name()  # a shorter title leaves the model's name more room

    def set_model(self, model_id: str | None, default_name: str, *, server_gone: bool = False) -> None:
        """The chat's chosen model (None: the default) and the default model's name ("" when none is set).
        server_gone: the chat's model is on a server that is no longer added (the default answers instead)."""
        self._model_id, self._default_name, self._server_gone = model_id, default_name, server_gone
        self._refresh()

    def set_remote_models(self, models: Sequence[RemoteModel], said: Mapping[str, str] | None = None) -> None:
        """The servers' models, as they last listed them; said: a line for each server that lists none now
        ("asking…", or that it did not answer), by the server's name."""
        self._remote, self._servers_said = tuple(models), dict(said or {})
        self._refresh()

    def button_text(self) -> str:
        """The whole name the button shows (before eliding)."""
        if self._model_id is None:
            return self._default_name or "No model chosen"
        on_server = self._remote_title(self._model_id)
        if on_server is not None:
            return f"{on_server} (server removed)" if self._server_gone else on_server
        title, missing = self._installed_model(self._model_id)
        return f"{title} (missing)" if missing else title

    def _remote_title(self, model_id: str) -> str | None:
        """"qwen2.5:7b on studio-pc" for a server's model the library does not hold; None for any other."""
        parts = split_model_id(model_id)
        if parts is None or self._installed.row_of(model_id) is not None:
            return None
        return f"{parts[1]} on {parts[0]}"

    # --- building the menu ------------------------------------------------------------

    def _installed_model(self, model_id: str) -> tuple[str, bool]:
        """A library model's title and whether its file is gone; an id no longer listed counts as missing."""
        row = self._installed.row_of(model_id)
        if row is None:
            return model_id, True
        index = self._installed.index(row, InstalledModelsModel.MODEL)
        return str(index.data() or model_id), bool(index.data(Roles.MISSING))

    def resizeEvent(self, event: QResizeEvent) -> None:  # Override QWidget.resizeEvent.
        super().resizeEvent(event)
        self._show_name()

    def _refresh(self, *_: object) -> None:
        self._show_name()
        self._build_menu()

    def _show_name(self) -> None:
        """The model's whole name when the header has room for it; the chat's title gives way
        first, down to half the header, and only then is the name elided."""
        text = self.button_text()
        button = self.model_button
        shown = button.fontMetrics().elidedText(text, Qt.TextElideMode.ElideRight, self._name_room())
        if shown != button.text():
            button.setText(shown)
        button.setProperty(FULL_TEXT, text)
        button.setToolTip(f"Model for this chat: {text}\nClick to choose another")

    def _name_room(self) -> int:
        """How wide the button's text may be: the header less its margins, the settings
        button, the spacing, the button's own icon and caret, and the title (up to half)."""
        layout = self._layout
        margins, spacing = layout.contentsMargins(), layout.spacing()
        room = self.width() - margins.left() - margins.right() - self.settings_button.sizeHint().width() - 2 * spacing
        title = self.title.fontMetrics().horizontalAdvance(self.title.full_text())
        button_extra = self.model_button.sizeHint().width() - self.model_button.fontMetrics().horizontalAdvance(
            self.model_button.text())
        return max(MODEL_BUTTON_MIN, room - min(title, room // 2) - button_extra)

    def _build_menu(self) -> None:
        """Each model once: the default is marked "(default)" in its own entry, not listed a
        second time as "Default model (…)"; an entry of its own stays only when no listed
        model is the default."""
        menu = self.model_menu
        menu.clear()
        # One of many: the style draws its mark for a single choice (a dot in Fusion, a check on macOS).
        self._group.deleteLater()
        self._group = QActionGroup(self)
        default_id = self._default_id()
        if default_id is None:
            self._choice(menu, f"Default model ({self._default_name or 'none set'})", None)
        listed: set[str] = set()
        for row in range(self._installed.rowCount()):
            index = self._installed.index(row, InstalledModelsModel.MODEL)
            model_id = str(index.data(Roles.ID))
            listed.add(model_id)
            if index.data(Roles.ROW).model.chats or model_id == self._model_id:  # an embedding model cannot chat
                self._add_model(menu, model_id, default_id)
        remote_chosen = self._model_id is not None and self._remote_title(self._model_id) is not None
        if self._model_id is not None and self._model_id not in listed and not remote_chosen:
            self._add_model(menu, self._model_id, default_id)  # removed from the library: say so, do not hide it
        self._add_remote(menu)
        self._check_current()
        menu.addSeparator()
        manage = menu.addAction("Manage models…")
        icons.themed(manage, "models")
        manage.triggered.connect(self.managerRequested)

    def _add_remote(self, menu: QMenu) -> None:
        """The servers' models, each marked with its server; the chat's own stays listed while its server is
        asked again or silent (its answer says then whether the server still has it)."""
        models = list(self._remote)
        own = None
        if self._model_id is not None and (parts := split_model_id(self._model_id)) is not None \
                and self._remote_title(self._model_id) is not None and all(m.id != self._model_id for m in models):
            own = RemoteModel(parts[0], parts[1])
            models.append(own)
        if not models and not self._servers_said:
            return
        menu.addSeparator()
        for model in models:
            gone = model is own and self._server_gone
            action = self._choice(menu, f"{model.name} on {model.server}" + (" (server removed)" if gone else ""),
                                  model.id)
            action.setToolTip(f"Answers come from {model.server}: what you send in this chat goes there")
            action.setEnabled(not gone)
        for server, words in self._servers_said.items():
            if all(m.server != server for m in models):
                menu.addAction(f"{server}: {words}".replace("&", "&&")).setEnabled(False)

    def _default_id(self) -> str | None:
        """The listed model the default names: the one made the default, else the one the
        window named for want of a default (the loaded one); None when it is not listed."""
        rows = [self._installed.index(row, InstalledModelsModel.MODEL) for row in range(self._installed.rowCount())]
        marked = [index for index in rows if index.data(Roles.ROW).is_default]
        named = [index for index in rows if str(index.data() or "") == self._default_name]
        found = marked or named
        return str(found[0].data(Roles.ID)) if found and self._default_name else None

    def _add_model(self, menu: QMenu, model_id: str, default_id: str | None) -> None:
        title, missing = self._installed_model(model_id)
        words = f"{title} (missing)" if missing else f"{title} (default)" if model_id == default_id else title
        action = self._choice(menu, words, model_id)
        action.setEnabled(not missing)
        if model_id == default_id:
            action.setToolTip("New chats use this model; choose another in Manage models…")

    def _choice(self, menu: QMenu, text: str, model_id: str | None) -> QAction:
        action = menu.addAction(text.replace("&", "&&"))
        action.setCheckable(True)
        action.setData(model_id)
        self._group.addAction(action)
        action.triggered.connect(lambda: self._chosen(model_id))
        return action

    def _chosen(self, model_id: str | None) -> None:
        # The check stays on the chat's model until set_model says the choice was taken.
        self._check_current()
        # The default's entry means "follow the default", as before: the chat keeps no model of its own.
        self.modelChosen.emit(None if model_id is not None and model_id == self._default_id() else model_id)

    def _check_current(self) -> None:
        current = self._model_id if self._model_id is not None else self._default_id()
        for action in self.model_actions():
            action.setChecked(action.data() == current)

    def model_actions(self) -> list[QAction]:
        """The menu's checkable entries: each model in the library's order (the default marked
        "(default)"), after a "Default model (…)" entry only when the default is not listed."""
        return [action for action in self.model_menu.actions() if action.isCheckable()]

