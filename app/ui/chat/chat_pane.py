"""ChatPane: the open chat's header, a banner for problems, the messages (or the empty state) and the composer."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QStackedWidget, QToolButton, QVBoxLayout, QWidget

from app.service.doors.chat import ChatDoor
from app.service.doors.models import ModelDoor
from app.service.events import ModelState
from app.ui.common import icons
from app.ui.state.adapter import ServiceAdapter
from app.ui.chat.chat_header import ChatHeader
from app.ui.chat.composer import Composer
from app.ui.chat.damaged_history_panel import DamagedHistoryPanel
from app.ui.memory.proposal_row import MemoryProposalRow
from app.ui.models.first_run import STARTER_TEXT, FirstRunOffer, offer_wanted
from app.ui.messages.message_view import MessageView
from app.ui.chat.tool_approval import ToolApprovalBar

# The messages and the composer share a column no wider than this, centred.
COLUMN_WIDTH = 820


class ChatPane(QWidget):
    """The right side of the window; shows what it is told (the window does the wiring).

    `approval` asks about the open chat's tool call waiting for the user, above the
    composer (show_approval); `proposal` (a MemoryProposalRow) above it proposes a memory after a chat
    (the window's MemoryHost wires it). The banner says one problem at a time; `problem_kind` is its kind ("engine",
    "model", ...), so the problem's end can take it away (`problem_solved`).
    """

    def __init__(self, adapter: ServiceAdapter, chat: ChatDoor, model: ModelDoor,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._chat, self._model = chat, model
        self.setObjectName("chatPane")
        self.setAutoFillBackground(True)
        self.setBackgroundRole(QPalette.ColorRole.Base)  # the page the messages sit on
        self.adapter = adapter
        self.problem_kind = ""
        # The model state starts as NONE before the service has said anything: that is
        # "not known yet", not "no model", so the empty page stays blank until it is known.
        self._model_known = False
        adapter.modelStateChanged.connect(self._model_state_known)
        self.header = ChatHeader(self.adapter, self)
        self.banner = QLabel(self)
        self.banner.setObjectName("banner")
        self.banner.setWordWrap(True)
        self.banner.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.banner_close = QToolButton(self)
        self.banner_close.setObjectName("bannerClose")
        self.banner_close.setToolTip("Dismiss")
        self.banner_close.setAccessibleName("Dismiss")
        icons.themed(self.banner_close, "close", icons.ROLE.HighlightedText)
        self.banner_row = QWidget(self)
        self.banner_row.setObjectName("bannerRow")
        banner_layout = QHBoxLayout(self.banner_row)
        banner_layout.setContentsMargins(0, 0, 0, 0)
        banner_layout.addWidget(self.banner, 1)
        banner_layout.addWidget(self.banner_close, 0, Qt.AlignmentFlag.AlignTop)
        self.history_panel = DamagedHistoryPanel(self)
        self.messages = MessageView(self)
        self.messages.setModel(self.adapter.messages)
        self.empty = self._build_empty_state()
        self.stack = QStackedWidget(self)
        self.stack.addWidget(self.messages)
        self.stack.addWidget(self.empty)
        self.proposal = MemoryProposalRow(self)
        self.proposal.setMaximumWidth(COLUMN_WIDTH)
        proposal_row = QHBoxLayout()
        proposal_row.setContentsMargins(16, 0, 16, 6)
        proposal_row.addWidget(self.proposal)
        self.approval = ToolApprovalBar(self)
        self.approval.setMaximumWidth(COLUMN_WIDTH)
        approval_row = QHBoxLayout()
        approval_row.setContentsMargins(16, 0, 16, 6)
        approval_row.addWidget(self.approval)
        self.composer = Composer(self)
        self.composer.setMaximumWidth(COLUMN_WIDTH)
        composer_row = QHBoxLayout()
        composer_row.setContentsMargins(16, 0, 16, 0)
        composer_row.addWidget(self.composer)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.header)
        for widget in (self.banner_row, self.history_panel):
            inset = QHBoxLayout()
            inset.setContentsMargins(16, 8, 16, 0)
            inset.addWidget(widget)
            layout.addLayout(inset)
        layout.addWidget(self.stack, 1)
        layout.addLayout(proposal_row)
        layout.addLayout(approval_row)
        layout.addLayout(composer_row)
        self.show_problem("")
        # The first message of a new chat comes after the chat is opened: the empty state
        # (or the starter's offer) gives way to it then.
        adapter.messages.rowsInserted.connect(lambda *_: self.update_stack())
        adapter.messages.modelReset.connect(lambda *_: self.update_stack())

    def _build_empty_state(self) -> QWidget:
        panel = QWidget(self)
        self.empty_text = QLabel(panel)
        self.empty_text.setObjectName("emptyText")
        self.empty_text.setWordWrap(True)
        self.empty_text.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_text.setMaximumWidth(560)
        self.import_button = QPushButton("Import a model file…", panel)
        self.first_run = FirstRunOffer(panel)
        layout = QVBoxLayout(panel)
        layout.addStretch(1)
        text_row = QHBoxLayout()  # centred by stretches: an alignment flag would lose the wrapped height
        text_row.addStretch(1)
        text_row.addWidget(self.empty_text, 100)
        text_row.addStretch(1)
        layout.addLayout(text_row)
        layout.addWidget(self.import_button, 0, Qt.AlignmentFlag.AlignHCenter)
        centred = QHBoxLayout()  # not an alignment flag: that would ignore the card's wrapped height
        centred.addStretch(1)
        centred.addWidget(self.first_run)
        centred.addStretch(1)
        layout.addLayout(centred)
        layout.addStretch(1)
        return panel

    def _model_state_known(self) -> None:
        self._model_known = True

    def update_stack(self) -> None:
        """The messages, or what to do when there is no model (or the starter is offered).

        While the model is not known yet, or the starter is being set up or loaded, an empty
        chat shows the first-run card alone (its setup progress, or nothing): a fresh window
        used to flash "No model yet…" and then "Ask anything…" before the starter's card.
        """
        c = self._model
        settling = not self._model_known or c.model_state == ModelState.INSTALLING or (
            c.model_state == ModelState.LOADING and offer_wanted(c))
        if settling and self.adapter.messages.rowCount() == 0:
            self.empty_text.setText("")
            self.empty_text.hide()
            self.import_button.hide()
            self.first_run.refresh()
            self.stack.setCurrentWidget(self.empty)
            return
        self.empty_text.show()
        self.import_button.show()
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

    def show_approval(self) -> None:
        """The open chat's oldest tool call waiting for the user, or nothing (one of another chat waits there)."""
        conversation = self._chat.conversation
        asked = self.adapter.approval_for(conversation.id if conversation is not None else None)
        if asked is None:
            self.approval.clear()
        elif asked.approval_id != self.approval.approval_id:
            self.approval.show_request(asked.approval_id, asked.server, asked.tool, asked.arguments)

    def show_problem(self, text: str, kind: str = "other") -> None:
        self.problem_kind = kind if text else ""
        self.banner.setText(text)
        self.banner_row.setVisible(bool(text))

    def problem_solved(self, kind: str) -> None:
        """An engine that failed answers again: its banner has nothing left to say."""
        if kind == self.problem_kind:
            self.show_problem("")
