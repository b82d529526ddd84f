"""The bar above the composer that asks before a tool runs: the server, the tool, its arguments, three choices."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase, QGuiApplication, QKeyEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from app.ui.messages.tool_parts import full_arguments, pretty_arguments

ARGUMENT_LINES = 8  # the arguments box shows this many lines before it scrolls


class _Arguments(QPlainTextEdit):
    """Read-only arguments; Esc is swallowed so that it does not reach the window (the Stop button stops)."""

    def keyPressEvent(self, event: QKeyEvent) -> None:  # Override QPlainTextEdit.keyPressEvent.
        if event.key() == Qt.Key.Key_Escape:
            event.accept()
            return
        super().keyPressEvent(event)


class ToolApprovalBar(QFrame):
    """Asks whether one tool call may run; not modal: the chat stays usable while it waits.

    show_request() fills it; `approval_id` is the request shown (None: hidden). Signals:
    decided(approval_id, decision) with decision "once", "always" or "deny" (ToolDecision's
    values). Esc does nothing here: Deny is a choice, and stopping is the Stop button's.
    """

    decided = Signal(int, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("toolApproval")
        self.setAccessibleName("Tool call waiting for your approval")
        self.approval_id: int | None = None
        self._full = ""
        self.title = QLabel(self)
        self.title.setObjectName("toolApprovalTitle")
        self.title.setWordWrap(True)
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        self.arguments = _Arguments(self)
        self.arguments.setObjectName("toolApprovalArguments")
        self.arguments.setReadOnly(True)
        self.arguments.setTabChangesFocus(True)
        self.arguments.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.arguments.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.arguments.setAccessibleName("Arguments of the tool call")
        self.copy_button = QPushButton("&Copy arguments", self)
        self.copy_button.setToolTip("Copy the arguments, whole, to the clipboard")
        self.allow_button = QPushButton("&Allow once", self)
        self.always_button = QPushButton("Al&ways allow this tool", self)
        self.deny_button = QPushButton("&Deny", self)
        self.allow_button.setDefault(True)
        for button, decision in ((self.allow_button, "once"), (self.always_button, "always"),
                                 (self.deny_button, "deny")):
            button.clicked.connect(lambda _=False, d=decision: self._decide(d))
        self.copy_button.clicked.connect(self._copy)
        self.allow_button.setAccessibleDescription("Run this call now; the next call asks again")
        self.always_button.setAccessibleDescription("Run it and every later call of this tool without asking; "
                                                    "Settings → Tools takes it back")
        self.deny_button.setAccessibleDescription("Do not run it: the model is told you refused")
        buttons = QHBoxLayout()
        buttons.addWidget(self.copy_button)
        buttons.addStretch(1)
        for button in (self.allow_button, self.always_button, self.deny_button):
            buttons.addWidget(button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 10, 12, 10)
        layout.addWidget(self.title)
        layout.addWidget(self.arguments)
        layout.addLayout(buttons)
        self.hide()

    def show_request(self, approval_id: int, server: str, tool: str, arguments: str) -> None:
        """Ask about one call (the one shown before, if any, is replaced)."""
        self.approval_id = approval_id
        self._full = full_arguments(arguments)
        self.title.setText(f"The model wants to run “{tool}” from the MCP server “{server}”. "
                           "Nothing runs until you choose.")
        self.arguments.setPlainText(pretty_arguments(arguments))
        self.arguments.setToolTip(self._full if len(self._full) < 4000 else self._full[:4000] + "…")
        lines = min(ARGUMENT_LINES, self.arguments.document().blockCount())
        self.arguments.setFixedHeight(self.arguments.fontMetrics().lineSpacing() * max(2, lines) + 14)
        self.set_working(False)
        self.show()

    def clear(self) -> None:
        self.approval_id = None
        self.hide()

    def set_working(self, working: bool) -> None:
        """Once a choice is sent, no second one until the service settles it."""
        for button in (self.allow_button, self.always_button, self.deny_button):
            button.setEnabled(not working)

    def full_text(self) -> str:
        return self._full

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(self._full)

    def _decide(self, decision: str) -> None:
        if self.approval_id is not None:
            self.set_working(True)
            self.decided.emit(self.approval_id, decision)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # Override QFrame.keyPressEvent: Esc is not Deny.
        if event.key() == Qt.Key.Key_Escape:
            event.accept()
            return
        super().keyPressEvent(event)
