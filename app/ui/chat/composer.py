"""The composer: a box that grows with its text, Enter sends, Shift+Enter is a new line, Esc stops.

The round button beside the text sends, and turns into Stop while the open chat's answer
is being written or waits its turn. The paperclip attaches files (chips above the box), the
picture button images (greyed, with the reason, while the chat's model cannot see them);
"Documents" chooses the collections the chat answers from. The microphone dictates
(app/ui/voice drives it; its listening bar sits above the box while it is on); the button beside it
starts voice mode, a spoken conversation (app/ui/voice/voice_mode_control.py), shown in the same bar.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QMimeData, QSize, Qt, Signal
from PySide6.QtGui import QKeyEvent, QResizeEvent
from PySide6.QtWidgets import (QFrame, QHBoxLayout, QLabel, QMenu, QPlainTextEdit, QSizePolicy, QToolButton, QVBoxLayout,
                               QWidget)

from app.ui.common import icons
from app.ui.chat.attachment_chips import AttachmentTray, local_files
from app.ui.chat.image_chips import pasted_image
from app.ui.voice.dictation_bar import DictationBar

# The box shows this many lines at most; longer text scrolls inside it.
MAX_LINES = 10
BUTTON_SIZE = 34


class ComposerEdit(QPlainTextEdit):
    """A text box that sends on Enter and is as tall as its text (up to MAX_LINES)."""

    submitted = Signal()
    stopRequested = Signal()
    filesOffered = Signal(list)  # list[Path]: files pasted or dropped on the box
    imageOffered = Signal(object)  # bytes (PNG) or QImage: an image pasted or dropped as data

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self._fit()

    def lines(self) -> int:
        """Lines the text takes at the box's width (wrapped lines count)."""
        return max(1, int(self.document().documentLayout().documentSize().height()))

    def _fit(self, *_args: object) -> None:
        shown = min(self.lines(), MAX_LINES)
        margins = self.contentsMargins()
        height = (shown * self.fontMetrics().lineSpacing() + 2 * int(self.document().documentMargin())
                  + margins.top() + margins.bottom())
        if height != self.height():
            self.setFixedHeight(height)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded if self.lines() > MAX_LINES
                                        else Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

    def resizeEvent(self, event: QResizeEvent) -> None:  # Override: wrapping changes with the width.
        super().resizeEvent(event)
        self._fit()

    def canInsertFromMimeData(self, source: QMimeData) -> bool:  # Override: files and images are attached.
        return bool(local_files(source)) or source.hasImage() or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:  # Override: files are attached, not their names typed.
        files = local_files(source)
        # Text copied from a word processor carries a picture of itself too: text wins, so a
        # copy is an image only when it has no words (a screenshot, a copied picture).
        image = None if files or source.text().strip() else pasted_image(source)
        if files:
            self.filesOffered.emit(files)
        elif image is not None:
            self.imageOffered.emit(image)  # a screenshot or a copied picture (Ctrl+V)
        else:
            super().insertFromMimeData(source)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # Override QPlainTextEdit.keyPressEvent.
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.submitted.emit()
            return
        if event.key() == Qt.Key.Key_Escape:
            self.stopRequested.emit()
            return
        super().keyPressEvent(event)


class Composer(QWidget):
    """Where the user writes; knows whether the open chat's answer is on its way.

    `note` is a line above the box for what the user should know before sending (a
    message waiting for another chat's answer). `tray` holds the files for the next message:
    Send waits while one is being read, and sends with text, files or both. `collections` is
    set by the window (all names, the chat's) and read when the Documents menu opens.
    Signals: sendRequested(text) (the window takes tray.ready() with it), stopRequested(),
    attachRequested() (the paperclip), imageRequested() (Add image), filesOffered(list of Path)
    (pasted or dropped on the box), imageOffered(PNG bytes or QImage: pasted as data),
    collectionsChosen(tuple of names), manageDocumentsRequested().
    """

    sendRequested = Signal(str)
    stopRequested = Signal()
    attachRequested = Signal()
    imageRequested = Signal()
    filesOffered = Signal(list)
    imageOffered = Signal(object)
    collectionsChosen = Signal(tuple)
    manageDocumentsRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.frame = QFrame(self)
        self.frame.setObjectName("composerFrame")
        self.edit = ComposerEdit(self.frame)
        self.edit.setObjectName("composer")
        self.edit.setPlaceholderText("Message Kestrel")
        self.edit.setToolTip("Enter sends · Shift+Enter starts a new line · Esc stops the answer")
        self.edit.setAccessibleName("Message")
        self.edit.setTabChangesFocus(True)
        self.button = QToolButton(self.frame)
        self.button.setObjectName("send")
        self.button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)
        self.button.setFixedSize(BUTTON_SIZE, BUTTON_SIZE)
        self.button.setIconSize(QSize(18, 18))
        self.tray = AttachmentTray(self.frame)
        self.attach_button = QToolButton(self.frame)
        self.attach_button.setObjectName("attach")
        self.attach_button.setFixedSize(BUTTON_SIZE, BUTTON_SIZE)
        self.attach_button.setIconSize(QSize(18, 18))
        self.attach_button.setAutoRaise(True)
        self.attach_button.setAccessibleName("Attach files")
        self.attach_button.setToolTip("Attach files: their text goes with your message (or drop or paste them here)")
        icons.themed(self.attach_button, "attach")
        self.image_button = QToolButton(self.frame)
        self.image_button.setObjectName("addImage")
        self.image_button.setFixedSize(BUTTON_SIZE, BUTTON_SIZE)
        self.image_button.setIconSize(QSize(18, 18))
        self.image_button.setAutoRaise(True)
        self.image_button.setAccessibleName("Add image")
        icons.themed(self.image_button, "image")
        self.set_vision(True, "")
        self.documents_button = QToolButton(self.frame)
        self.documents_button.setObjectName("chatDocuments")
        self.documents_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.documents_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.documents_button.setAutoRaise(True)
        self.documents_button.setFixedHeight(BUTTON_SIZE)  # on the paperclip's and Send's line
        # Its menu arrow sat at the bottom corner, apart from the words: the count says enough.
        self.documents_button.setStyleSheet("QToolButton::menu-indicator { image: none; width: 0px; }")
        self.documents_button.setToolTip("The document collections this chat answers from")
        icons.themed(self.documents_button, "documents")
        self.documents_menu = QMenu(self.documents_button)
        self.documents_menu.aboutToShow.connect(self._fill_documents_menu)
        self.documents_button.setMenu(self.documents_menu)
        self.collections: Callable[[], tuple[Sequence[str], Sequence[str]]] | None = None
        self.set_chosen_count(0)
        self.mic_button = QToolButton(self.frame)
        self.mic_button.setObjectName("dictate")
        self.mic_button.setFixedSize(BUTTON_SIZE, BUTTON_SIZE)
        self.mic_button.setIconSize(QSize(18, 18))
        self.mic_button.setAutoRaise(True)
        self.mic_button.setCheckable(True)
        self.voice_mode_button = QToolButton(self.frame)
        self.voice_mode_button.setObjectName("voiceMode")
        self.voice_mode_button.setFixedSize(BUTTON_SIZE, BUTTON_SIZE)
        self.voice_mode_button.setIconSize(QSize(18, 18))
        self.voice_mode_button.setAutoRaise(True)
        self.voice_mode_button.setCheckable(True)
        icons.themed(self.voice_mode_button, "voice-mode")
        self.dictation_bar = DictationBar(self.frame)
        self.set_dictating(False, "Dictate: speak, and your words go in the message box")
        self.set_voice_mode(False, "Talk with Kestrel hands-free")
        self.note = QLabel(self)
        self.note.setObjectName("composerNote")
        self.note.setWordWrap(True)
        self.note.hide()
        column = QVBoxLayout(self.frame)
        column.setContentsMargins(6, 6, 6, 6)
        column.setSpacing(4)
        column.addWidget(self.tray)
        column.addWidget(self.dictation_bar)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.attach_button, 0, Qt.AlignmentFlag.AlignBottom)
        row.addWidget(self.image_button, 0, Qt.AlignmentFlag.AlignBottom)
        row.addWidget(self.edit, 1, Qt.AlignmentFlag.AlignVCenter)
        row.addWidget(self.documents_button, 0, Qt.AlignmentFlag.AlignBottom)
        row.addWidget(self.mic_button, 0, Qt.AlignmentFlag.AlignBottom)
        row.addWidget(self.voice_mode_button, 0, Qt.AlignmentFlag.AlignBottom)
        row.addWidget(self.button, 0, Qt.AlignmentFlag.AlignBottom)
        column.addLayout(row)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 12)
        layout.addWidget(self.note)
        layout.addWidget(self.frame)
        self._streaming = False
        self.set_streaming(False)
        self.edit.submitted.connect(self._send)
        self.edit.stopRequested.connect(self.stopRequested)
        self.edit.textChanged.connect(self._update_button)
        self.edit.filesOffered.connect(self.filesOffered)
        self.edit.imageOffered.connect(self.imageOffered)
        self.tray.changed.connect(self._update_button)
        self.attach_button.clicked.connect(self.attachRequested)
        self.image_button.clicked.connect(self.imageRequested)
        self.button.clicked.connect(self._button_clicked)

    def set_vision(self, available: bool, reason: str) -> None:
        """Whether the open chat's model can see images: the picture button is greyed while it
        cannot, and says why (its tooltip and what a screen reader hears)."""
        self.image_button.setEnabled(available)
        tip = ("Add images: the model sees them with your message (or paste or drop them here)" if available
               else f"Images cannot be added: {reason}")
        self.image_button.setToolTip(tip)
        self.image_button.setAccessibleDescription(tip)

    def set_chosen_count(self, count: int) -> None:
        """The Documents button says how many collections the open chat answers from."""
        text = f"Documents · {count}" if count else "Documents"
        self.documents_button.setText(text)
        self.documents_button.setAccessibleName(f"Documents: {count} collection{'' if count == 1 else 's'} "
                                                "chosen for this chat" if count else "Documents: none chosen")

    def _fill_documents_menu(self) -> None:
        menu = self.documents_menu
        menu.clear()
        names, chosen = self.collections() if self.collections is not None else ((), ())
        if not names:
            menu.addAction("No collections yet: add a folder in Manage documents…").setEnabled(False)
        for name in names:
            action = menu.addAction(name)
            action.setCheckable(True)
            action.setChecked(name in chosen)
            action.toggled.connect(lambda on, name=name: self._toggle_collection(name, on))
        menu.addSeparator()
        menu.addAction("Manage documents…", self.manageDocumentsRequested.emit)

    def _toggle_collection(self, name: str, on: bool) -> None:
        names, chosen = self.collections() if self.collections is not None else ((), ())
        picked = [other for other in names if (other == name and on) or (other != name and other in chosen)]
        self.collectionsChosen.emit(tuple(picked))

    def set_dictating(self, on: bool, tip: str) -> None:
        """The microphone button while dictation is on (pressed in, a Stop square) or off, and its tooltip
        (what a press does, or why dictation cannot start here)."""
        self.mic_button.setChecked(on)
        self.mic_button.setAccessibleName("Stop dictating" if on else "Dictate")
        self.mic_button.setToolTip(tip)
        icons.themed(self.mic_button, "stop" if on else "microphone")

    def set_voice_mode(self, on: bool, tip: str) -> None:
        """The voice-mode button pressed in while voice mode is on, and its tooltip (what a press does)."""
        self.voice_mode_button.setChecked(on)
        self.voice_mode_button.setAccessibleName("End voice mode" if on else "Voice mode")
        self.voice_mode_button.setToolTip(tip)

    def insert_dictated(self, text: str) -> None:
        """Dictated words into the box at the cursor, a space apart from the words around them."""
        cursor = self.edit.textCursor()
        before = self.edit.toPlainText()[:cursor.position()]
        cursor.insertText((" " if before and not before[-1].isspace() else "") + text.strip())
        self.edit.setTextCursor(cursor)
        self.edit.setFocus()

    def send(self) -> None:
        """Send what the box holds, as Enter does (nothing while an answer is written or files are read)."""
        self._send()

    def set_streaming(self, streaming: bool) -> None:
        """While the open chat's answer is on its way the button stops it."""
        self._streaming = streaming
        self.button.setText("Stop" if streaming else "Send")
        self.button.setAccessibleName(self.button.text())
        self.button.setToolTip("Stop the answer (Esc)" if streaming else "Send (Enter)")
        icons.themed(self.button, "stop" if streaming else "send", icons.ROLE.HighlightedText)
        self._update_button()

    def set_note(self, text: str) -> None:
        self.note.setText(text)
        self.note.setVisible(bool(text))

    def _update_button(self) -> None:
        ready = not self.tray.reading() and self._has_content()
        self.button.setEnabled(self._streaming or ready)
        if not self._streaming:
            self.button.setToolTip("Waits until the attached files and images are read" if self.tray.reading()
                                   else "Send (Enter)")

    def _has_content(self) -> bool:
        return bool(self.edit.toPlainText().strip() or self.tray.ready() or self.tray.images())

    def _button_clicked(self) -> None:
        if self._streaming:
            self.stopRequested.emit()
        else:
            self._send()

    def _send(self) -> None:
        text = self.edit.toPlainText()
        if self._streaming or self.tray.reading() or not self._has_content():
            return
        # ChatAttach clears the box once the open chat has taken the message.
        self.sendRequested.emit(text)
