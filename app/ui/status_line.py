"""The status bar's three parts, model · device · activity, each a button where clicking helps."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSize, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QSizePolicy, QToolButton, QWidget

from app.service.events import ModelState
from app.ui.common import icons

_MODEL_WORDS = {ModelState.FAILED: "Model failed to load", ModelState.NONE: "No model"}
IDLE = "Idle"
# While a model is being set up or loaded there is no device yet and nothing is idle: the model's own
# words ("Loading Qwen…") say what happens, and "No device · Idle" beside them contradicted it.
_UNDER_WAY = (ModelState.INSTALLING, ModelState.LOADING)
# How long "Exported to …" stays: long enough to read it and click it.
NOTICE_MS = 20_000


def device_icon(device: str) -> str:
    """The icon for a device name as the engine reports it ("CPU", "CUDA GPU 0", "NPU (QNN)")."""
    lowered = device.lower()
    if "npu" in lowered:
        return "npu"
    if any(word in lowered for word in ("gpu", "cuda", "vulkan", "metal", "directml", "rocm")):
        return "gpu"
    return "cpu"


def _part(parent: QWidget, name: str, tip: str) -> QToolButton:
    button = QToolButton(parent)
    button.setObjectName(name)
    button.setAutoRaise(True)
    button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
    button.setIconSize(QSize(16, 16))
    button.setToolTip(tip)
    return button


class StatusLine(QWidget):
    """Model (opens the manager), device (opens the hardware window), activity.

    The activity of an answer written for a chat that is not open names that chat, and
    clicking it opens that chat (chatRequested). `server` says where the API server
    listens (hidden while it is off) and opens its window (serverRequested). `progress`
    and `cancel` show the starter's set-up. `notice` says where a chat was exported;
    clicking it opens that folder. The parts agree: while the model is set up or loaded the
    device part is hidden (there is none yet) and so is an "Idle" activity.
    """

    managerRequested = Signal()
    serverRequested = Signal()
    hardwareRequested = Signal()
    chatRequested = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = _part(self, "statusModel", "Open the model manager (Ctrl+M)")
        icons.themed(self.model, "model", icons.ROLE.WindowText)
        self.device = _part(self, "statusDevice", "")
        self.activity = _part(self, "statusActivity", "")
        self.activity.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.server = _part(self, "statusServer", "Show the API server: its address, key and requests")
        icons.themed(self.server, "server", icons.ROLE.WindowText)
        self.server.hide()
        self.notice = _part(self, "statusNotice", "")
        icons.themed(self.notice, "folder", icons.ROLE.WindowText)
        self.notice.hide()
        self._notice_folder: Path | None = None
        self._notice_timer = QTimer(self)
        self._notice_timer.setSingleShot(True)
        self._notice_timer.setInterval(NOTICE_MS)
        self._notice_timer.timeout.connect(self.notice.hide)
        self.progress = QProgressBar(self)
        self.progress.setMaximumWidth(220)
        self.cancel = QToolButton(self)
        self.cancel.setText("Cancel")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.setSpacing(2)
        self._device_dot, self._activity_dot = self._dot(), self._dot()
        for widget in (self.model, self._device_dot, self.device, self._activity_dot):
            layout.addWidget(widget)
        layout.addWidget(self.activity, 1, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.notice)
        layout.addWidget(self.server)
        layout.addWidget(self.progress)
        layout.addWidget(self.cancel)
        self.progress.hide()
        self.cancel.hide()
        self._activity_chat: int | None = None
        self._state = ModelState.NONE
        self.model.clicked.connect(self.managerRequested)
        self.device.clicked.connect(self.hardwareRequested)
        self.activity.clicked.connect(self._activity_clicked)
        self.server.clicked.connect(self.serverRequested)
        self.notice.clicked.connect(self._open_notice_folder)
        self.set_activity(IDLE)

    def _dot(self) -> QLabel:
        dot = QLabel("·", self)
        dot.setObjectName("statusDot")
        return dot

    def set_model(self, state: ModelState, detail: str) -> None:
        self.model.setText(_MODEL_WORDS.get(state, detail))
        self._state = state
        self._show_parts()

    def _show_parts(self) -> None:
        """Hide what the model's state contradicts; each part's dot goes with it."""
        under_way = self._state in _UNDER_WAY
        self.device.setVisible(not under_way)
        self.activity.setVisible(not (under_way and self.activity.text() == IDLE))
        self._device_dot.setVisible(not self.device.isHidden())
        self._activity_dot.setVisible(not self.activity.isHidden())

    def parts_said(self) -> list[str]:
        """The words of the parts shown, in order (what a person reads, for tests and scripts)."""
        return [part.text() for part in (self.model, self.device, self.activity) if not part.isHidden()]

    def set_device(self, device: str | None, reasons: tuple[str, ...] = (), fell_back: str = "", *,
                   server: str = "") -> None:
        """The device in use (None: no model ready); a fall-back is never silent. server: the name of the
        server the person added that answers (device then says where it is: "studio-pc (192.168.1.20:8080)"),
        shown with the server's icon, never as this PC's CPU."""
        text = device or "No device"
        if fell_back:
            text += f" (fell back: {_shorten(fell_back, 80)})"
        self.device.setText(text)
        icons.themed(self.device, "server" if server else device_icon(device or ""), icons.ROLE.WindowText)
        if server:
            reasons = (*reasons, f"What you send goes to {server}; this computer does not write the answers.")
        why = "\n".join(reasons)
        self.device.setToolTip((why + "\n\n" if why else "") + "Show the hardware and why this device (Ctrl+Shift+H)")

    def set_activity(self, text: str, chat_id: int | None = None, chat_title: str = "") -> None:
        """What is happening; chat_id names the chat it is for when that chat is not the open one."""
        self._activity_chat = chat_id
        shown = f"“{_shorten(chat_title, 40)}”: {text}" if chat_id is not None and chat_title else text
        self.activity.setText(shown)
        self.activity.setToolTip(f"Open “{chat_title}”" if chat_id is not None else "")
        self.activity.setEnabled(True)
        self.activity.setAutoRaise(True)
        self.activity.setCursor(Qt.CursorShape.PointingHandCursor if chat_id is not None
                                else Qt.CursorShape.ArrowCursor)
        self._show_parts()

    def set_server(self, words: str) -> None:
        """Where the API server is ("API on 127.0.0.1:8765"); "" hides the part (the server is off)."""
        self.server.setText(words)
        self.server.setVisible(bool(words))

    def show_exported(self, path: Path) -> None:
        """Say where a chat was written, for a while; a click opens the folder that holds it."""
        self._notice_folder = path.parent
        shown = str(path) if len(str(path)) <= 70 else "…" + str(path)[-69:]  # the file's name stays
        self.notice.setText(f"Exported to {shown} · Show in folder")
        self.notice.setToolTip(f"{path}\nOpen the folder that holds it")
        self.notice.setCursor(Qt.CursorShape.PointingHandCursor)
        self.notice.show()
        self._notice_timer.start()

    def _open_notice_folder(self) -> None:
        if self._notice_folder is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(self._notice_folder)))
        self.notice.hide()

    def activity_text(self) -> str:
        return self.activity.text()

    def _activity_clicked(self) -> None:
        if self._activity_chat is not None:
            self.chatRequested.emit(self._activity_chat)

    def show_progress(self, what: str, done: int, total: int) -> None:
        self.progress.show()
        self.cancel.show()
        # The words are the status text's and the bar's tooltip: inside a bar the status
        # line's height allows, "Setting up the starter model: 42%" was cut to pieces.
        self.progress.setToolTip(what)
        self.progress.setAccessibleName(what)
        if total <= 0:  # no measure of progress (waiting for another Kestrel): a busy bar
            self.progress.setFormat("")
            self.progress.setMaximum(0)
            return
        self.progress.setFormat("%p%")
        self.progress.setMaximum(1000)
        self.progress.setValue(int(done * 1000 / max(total, 1)))

    def hide_progress(self) -> None:
        self.progress.hide()
        self.cancel.hide()


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
