"""QuickAskWindow: a small window on top of whatever the person is doing, to ask and read the answer there."""

from __future__ import annotations

import asyncio

from PySide6.QtCore import QEvent, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import (QCloseEvent, QGuiApplication, QHideEvent, QImage, QKeyEvent, QPainter, QPaintEvent, QPalette,
                           QPixmap, QScreen, QShowEvent)
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton, QVBoxLayout, QWidget

from app.service import events as ev
from app.service.documents.attached_images import ImagesUnreadable
from app.service.doors.quick_ask import QuickAskDoor
from app.service.events import ModelState
from app.ui.chat.attachment_chips import Chip, ChipState, FlowLayout
from app.ui.chat.composer import ComposerEdit
from app.ui.chat.image_chips import png_bytes
from app.ui.common import icons
from app.ui.common.theme import part_styles
from app.ui.common.window_presence import window_state
from app.ui.quick_ask.quick_answer import QuickAnswers
from app.ui.quick_ask.quick_approval import QuickApproval
from app.ui.quick_ask.quick_chips import CopiedTextChip, ScreenshotChip, copied_text, with_copied
from app.ui.quick_ask.screen_grab import GRAB_REFUSED, GrabScreen, RegionPicker, grab_screen, refused, screen_with_mouse

TITLE = "Kestrel — Quick ask"
WIDTH = 640
# From the top of the screen with the mouse: near the top, where the eye goes, with room to grow.
TOP_SHARE = 0.18
# Hidden before the screen is grabbed, so that the window is not in its own picture: the desktop
# takes a moment to take it off the screen.
HIDE_BEFORE_GRAB_MS = 150
NO_MODEL = "No model: open Kestrel to choose one."
MODEL_FAILED = "The model could not be loaded: open Kestrel to choose another."
COPIED_MS = 1500


class QuickAskWindow(QWidget):
    """Frameless, on top, a tool window (no taskbar slot). `summon(question)` shows it on the screen
    with the mouse, focused on its question; a question given is asked at once, in a new exchange.

    Enter asks, Shift+Enter starts a new line, Esc hides (nothing is stopped). Chips above the
    question: the copied text (or the X11 selection) and screenshots, each removable. The answer
    streams below, drawn as the chat pane draws it, each message offering Copy alone; a tool call
    it makes asks below it (`approval`, the chat's bar); Copy, Stop while it is written, New (start
    over), and Continue in Kestrel, which emits continueRequested(conversation id) for the main
    window to open (and keeps the chat whatever the settings say). `grab` takes the screenshot (a
    test gives its own: offscreen, Qt's grab is blank).
    """

    continueRequested = Signal(int)
    shown = Signal()  # on screen (its show event): for the quick-ask benchmark's timing

    def __init__(self, door: QuickAskDoor, *, grab: GrabScreen = grab_screen, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Tool | Qt.WindowType.FramelessWindowHint
                         | Qt.WindowType.WindowStaysOnTopHint)
        self._door, self._grab = door, grab
        self.setWindowTitle(TITLE)
        self.setObjectName("quickAskWindow")
        self.setAutoFillBackground(True)
        self.setBackgroundRole(QPalette.ColorRole.Base)
        self.setFixedWidth(WIDTH)
        self._asking = False  # inside ask(): a Problem said now is about this question
        self._offered = ""  # the copied text offered last: not offered again until it changes
        self.region_picker: RegionPicker | None = None
        self._build()
        self.answers.delegate.set_wrap_code(door.wrap_code)
        self._unsubscribe = door.subscribe(self._heard)
        self.destroyed.connect(self._unsubscribe)
        self.show_state()

    def _build(self) -> None:
        self.chips = QWidget(self)
        self.chips.setObjectName("quickChips")
        self.chip_flow = FlowLayout(self.chips)
        self.chips.hide()
        # The chat's composer box, framed and styled as it is there (theme.part_styles' composerFrame).
        self.question_frame = QFrame(self)
        self.question_frame.setObjectName("composerFrame")
        self.question = ComposerEdit(self.question_frame)
        self.question.setObjectName("composer")
        self.question.setPlaceholderText("Ask Kestrel…")
        self.question.setAccessibleName("Question")
        self.question.submitted.connect(self.ask)
        self.question.stopRequested.connect(self.hide)  # Esc
        self.question.imageOffered.connect(self._image_pasted)
        self.screenshot = _tool(self.question_frame, "quickScreenshot", "image",
                                "Attach a screenshot: drag over part of the screen, or click for all of it")
        self.screenshot.clicked.connect(self.take_screenshot)
        self.ask_button = QPushButton("Ask", self)
        self.ask_button.setObjectName("quickAsk")
        self.ask_button.setDefault(True)
        self.ask_button.clicked.connect(self._ask_or_stop)
        self.answers = QuickAnswers(lambda: self._door.conversation_id, self)
        self.answers.grewTaller.connect(self._fit)
        self.approval = QuickApproval(lambda: self._door.conversation_id, self._door.answer_tool, self)
        self.status = QLabel(self)
        self.status.setObjectName("quickStatus")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.copy_button = QPushButton("Copy", self)
        self.copy_button.setToolTip("Copy the answer as written (Markdown)")
        self.copy_button.clicked.connect(self.copy_answer)
        self._copied_timer = QTimer(self)  # the window's own: it ends with the window
        self._copied_timer.setSingleShot(True)
        self._copied_timer.timeout.connect(lambda: self.copy_button.setText("Copy"))
        self.new_button = QPushButton("New", self)
        self.new_button.setToolTip("Start over: the next question starts a new chat")
        self.new_button.clicked.connect(self.new_exchange)
        self.continue_button = QPushButton("Continue in Kestrel", self)
        self.continue_button.setToolTip("Open this exchange as a chat in Kestrel's window")
        self.continue_button.clicked.connect(self.continue_in_kestrel)
        in_frame = QHBoxLayout(self.question_frame)
        in_frame.setContentsMargins(8, 4, 6, 4)
        in_frame.setSpacing(4)
        in_frame.addWidget(self.question, 1)
        in_frame.addWidget(self.screenshot, 0, Qt.AlignmentFlag.AlignBottom)
        ask_row = QHBoxLayout()
        ask_row.setSpacing(8)
        ask_row.addWidget(self.question_frame, 1)
        ask_row.addWidget(self.ask_button, 0, Qt.AlignmentFlag.AlignVCenter)
        self.answer_actions = QWidget(self)
        action_row = QHBoxLayout(self.answer_actions)
        action_row.setContentsMargins(0, 0, 0, 0)
        action_row.addWidget(self.copy_button)
        action_row.addStretch(1)
        action_row.addWidget(self.new_button)
        action_row.addWidget(self.continue_button)
        layout = self._column = QVBoxLayout(self)
        layout.setContentsMargins(12, 12, 12, 12)
        layout.setSpacing(8)
        layout.addWidget(self.chips)
        layout.addLayout(ask_row)
        layout.addWidget(self.answers)
        layout.addWidget(self.approval)  # below the answer that asks, where the eye is
        layout.addWidget(self.status)
        layout.addWidget(self.answer_actions)

    @property
    def conversation_id(self) -> int | None:
        """The exchange's chat (None before its first question is saved)."""
        return self._door.conversation_id

    # --- showing --------------------------------------------------------------------------

    def summon(self, question: str = "") -> None:
        """Show it centred near the top of the screen with the mouse, raised and focused on its
        question, offering what was copied; a question given is asked at once, in a new exchange."""
        asking = bool(question.strip())
        if asking:
            self._offer_copied()  # it goes with the question asked at once
        self.follow_theme()
        screen = screen_with_mouse()
        self._fit()
        area = screen.availableGeometry()
        self.move(area.center().x() - self.width() // 2, area.top() + round(area.height() * TOP_SHARE))
        self.show()
        self.raise_()
        self.activateWindow()
        self.question.setFocus(Qt.FocusReason.ActiveWindowFocusReason)
        if asking:
            self.new_exchange()
            self.question.setPlainText(question)
            self.ask()
        else:
            # Shown first: reading the clipboard can wait on the program that owns it (seconds, on X11,
            # for one that does not answer), and the window must be there before that.
            QTimer.singleShot(0, self._offer_copied)

    def _fit(self) -> None:
        self._column.activate()
        self.resize(WIDTH, self.sizeHint().height())

    def follow_theme(self) -> None:
        """Answers, question box and approval bar drawn for a light or a dark page, as the palette is now."""
        dark = self.palette().color(QPalette.ColorRole.Base).lightnessF() < 0.5
        styles = part_styles(dark)  # the chat's question box and approval bar, as they look there
        for part, name in ((self.question_frame, "composerFrame"), (self.approval, "toolApproval")):
            if part.styleSheet() != styles[name]:
                part.setStyleSheet(styles[name])
        if self.answers.delegate.dark != dark:
            self.answers.delegate.dark = dark
            self.answers.delegate.clear()
            self.answers.viewport().update()

    def changeEvent(self, event: QEvent) -> None:  # Override: a theme change redraws the answers.
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and hasattr(self, "answers"):  # not while it is built
            self.follow_theme()
        elif event.type() in (QEvent.Type.ActivationChange, QEvent.Type.WindowStateChange):
            self._say_window_state()

    def showEvent(self, event: QShowEvent) -> None:  # Override: the engine's pace follows this window too.
        super().showEvent(event)
        self._say_window_state()  # inside summon()'s show(): a paused engine resumes before the question
        self.shown.emit()

    def hideEvent(self, event: QHideEvent) -> None:  # Override: hidden, it no longer keeps the engine awake.
        super().hideEvent(event)
        self._say_window_state()

    def _say_window_state(self) -> None:
        """Where this window is, for the engine's pace: it follows the most awake of Kestrel's windows,
        so a question asked here with the main window in the tray is not paused."""
        self._door.set_window_state(window_state(self.isVisible(), self.isMinimized(),
                                                 QGuiApplication.applicationState()))

    def keyPressEvent(self, event: QKeyEvent) -> None:  # Override: Esc hides, from anywhere in it.
        if event.key() == Qt.Key.Key_Escape:
            self.hide()
            return
        super().keyPressEvent(event)

    def closeEvent(self, event: QCloseEvent) -> None:  # Override: closed for good, the exchange is over.
        self._door.end()
        super().closeEvent(event)

    def paintEvent(self, event: QPaintEvent) -> None:  # Override: frameless, so its own edge.
        super().paintEvent(event)
        painter = QPainter(self)
        painter.setPen(self.palette().color(QPalette.ColorRole.Mid))
        painter.drawRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5))
        painter.end()

    # --- asking ---------------------------------------------------------------------------

    def ask(self) -> bool:
        """Ask what is typed, with the chips; False (said) if it cannot be asked now."""
        door = self._door
        if door.busy:
            return False
        if door.model_state in (ModelState.NONE, ModelState.FAILED):
            self.show_state()
            return False
        chips = self._chips()
        if any(chip.state == ChipState.READING for chip in chips):
            self.status.setText("The screenshot is still being checked; ask again in a moment.")
            return False
        question = self.question.toPlainText()
        copied = next((chip for chip in chips if isinstance(chip, CopiedTextChip)), None)
        text = with_copied(question, copied.text) if copied is not None else question
        images = [chip.image for chip in chips if chip.kind == "image" and chip.image is not None]
        if not (text.strip() or images):
            return False
        self._asking = True
        try:
            asked = door.ask(text, images)
        finally:
            self._asking = False
        if asked:
            self.question.clear()
            for chip in chips:
                self._remove_chip(chip)
            self.status.setText("")
            self.show_state()
        return asked

    def _ask_or_stop(self) -> None:
        if self._door.busy:
            self._door.stop()
        else:
            self.ask()

    def new_exchange(self) -> None:
        """Start over: the exchange on screen is over (stopped; deleted when quick-ask chats are not kept)."""
        self._door.new_exchange()
        self.answers.clear()
        self.status.setText("")
        self.show_state()

    def continue_in_kestrel(self) -> None:
        """Open the exchange as a chat in the main window; quick ask starts over."""
        conversation_id = self._door.hand_over()
        if conversation_id is None:
            return
        self.answers.clear()
        self.show_state()
        self.hide()
        self.continueRequested.emit(conversation_id)

    def copy_answer(self) -> None:
        QGuiApplication.clipboard().setText(self.answers.last_answer())
        self.copy_button.setText("Copied")
        self._copied_timer.start(COPIED_MS)

    # --- what the service says ------------------------------------------------------------

    def _heard(self, event: ev.Event) -> None:
        if isinstance(event, ev.SettingsChanged):  # code blocks drawn as the person chose in View
            self.answers.delegate.set_wrap_code(event.settings.wrap_code)
            return
        if self.approval.hear(event):
            self._fit()
            return
        if self.answers.hear(event, self._door.questions):
            if isinstance(event, (ev.AnswerFinished, ev.AnswerInterrupted)):
                if isinstance(event, ev.AnswerInterrupted) and event.detail:
                    self.status.setText(event.detail)
                self.show_state()
            return
        if isinstance(event, ev.ActivityChanged) and event.conversation_id is not None \
                and event.conversation_id == self._door.conversation_id and self._door.busy:
            self.status.setText(event.text)
        elif isinstance(event, ev.Problem) and (self._asking or self._door.busy) and self._ours(event):
            self.status.setText(event.text)
            returned = self._door.take_returned()
            if returned and not self.question.toPlainText().strip():
                self.question.setPlainText(returned)
        elif isinstance(event, (ev.ModelStateChanged, ev.AnswerQueueChanged)):
            self.show_state()

    def _ours(self, problem: ev.Problem) -> bool:
        """About this exchange, or about no chat (the engine, the model): not another chat's."""
        return problem.conversation_id is None or problem.conversation_id == self._door.conversation_id

    def show_state(self) -> None:
        """Ask or Stop, the buttons an answer offers, and the model's words while none is ready."""
        door = self._door
        busy = door.busy
        self.ask_button.setText("Stop" if busy else "Ask")
        self.ask_button.setToolTip("Stop the answer (what was written stays)" if busy else "Ask (Enter)")
        has_answer = bool(self.answers.last_answer()) or busy
        self.answer_actions.setVisible(has_answer)
        self.copy_button.setEnabled(bool(self.answers.last_answer()) and not busy)
        self.continue_button.setEnabled(door.conversation_id is not None)
        words = self._model_words()
        if words:
            self.status.setText(words)
        elif self.status.text() in (NO_MODEL, MODEL_FAILED) or (self.status.text() and not busy
                                                                and self.status.text().endswith("…")):
            self.status.setText("")  # the model is ready now; an activity's words are over
        self.status.setVisible(bool(self.status.text()))
        self.approval.follow()  # the exchange may have changed (New, Continue in Kestrel)
        self._fit()

    def _model_words(self) -> str:
        """The main window's words for a model not ready: loading…, or none (choose one in Kestrel)."""
        state = self._door.model_state
        if state == ModelState.NONE:
            return NO_MODEL
        if state == ModelState.FAILED:
            return MODEL_FAILED
        if state in (ModelState.LOADING, ModelState.INSTALLING):
            return self._door.model_detail or "Loading the model…"
        return ""

    # --- chips ----------------------------------------------------------------------------

    def _chips(self) -> list[Chip]:
        return [child for child in self.chips.children() if isinstance(child, Chip)]

    def _add_chip(self, chip: Chip) -> None:
        chip.removeRequested.connect(lambda: self._remove_chip(chip))
        self.chip_flow.addWidget(chip)
        self.chips.show()
        self._fit()

    def _remove_chip(self, chip: Chip) -> None:
        self.chip_flow.removeWidget(chip)
        chip.setParent(None)
        chip.deleteLater()
        self.chips.setVisible(bool(self._chips()))
        self._fit()

    def _offer_copied(self) -> None:
        """The copied text (or the selection), as a chip, unless it was offered already."""
        text = copied_text()
        if not text.strip() or text == self._offered:
            return
        self._offered = text
        for chip in self._chips():
            if isinstance(chip, CopiedTextChip):
                self._remove_chip(chip)
        self._add_chip(CopiedTextChip(text, self.chips))
        if self.isVisible():
            self._fit()

    def take_screenshot(self) -> None:
        """Hide, grab the screen with the mouse, then let the person drag over the part to ask about."""
        screen = screen_with_mouse()
        self.hide()
        QTimer.singleShot(HIDE_BEFORE_GRAB_MS, lambda: self._grab_now(screen))

    def _grab_now(self, screen: QScreen) -> None:
        grab = self._grab(screen)
        if refused(grab):
            self._show_again()
            self.status.setText(GRAB_REFUSED)
            self.status.show()
            self._fit()
            return
        picker = self.region_picker = RegionPicker(grab, screen)
        picker.picked.connect(self._screenshot_picked)
        picker.cancelled.connect(self._screenshot_cancelled)
        picker.show()
        picker.raise_()
        picker.activateWindow()

    def _screenshot_cancelled(self) -> None:
        self.region_picker = None
        self._show_again()

    def _screenshot_picked(self, region: QPixmap) -> None:
        self.region_picker = None
        self._show_again()
        self._image_pasted(region.toImage())

    def _image_pasted(self, image: bytes | QImage) -> None:
        chip = ScreenshotChip(self.chips)
        self._add_chip(chip)
        self._door.spawn(self._check(chip, image))

    async def _check(self, chip: ScreenshotChip, image: bytes | QImage) -> None:
        """Encoded and checked off the UI thread, as a pasted image is; refused by the model's sight when it has none."""
        data = image if isinstance(image, bytes) else await asyncio.to_thread(png_bytes, image)
        try:
            checked = await self._door.read_image_data(data, "Screenshot")
        except ImagesUnreadable as refusal:
            if chip in self._chips():
                chip.set_read(str(refusal))
            return
        if chip not in self._chips():
            return  # removed while it was checked
        sight = self._door.vision()
        if sight.available:
            chip.set_read(checked)
        else:
            chip.set_unseen(checked, sight.reason)
        self._fit()

    def _show_again(self) -> None:
        self.show()
        self.raise_()
        self.activateWindow()
        self.question.setFocus(Qt.FocusReason.ActiveWindowFocusReason)


def _tool(parent: QWidget, name: str, icon: str, tip: str) -> QToolButton:
    button = QToolButton(parent)
    button.setObjectName(name)
    button.setToolTip(tip)
    button.setAccessibleName(tip.split(":")[0])
    icons.themed(button, icon)
    return button
