"""MessageView: the conversation as a list, with copy / regenerate / edit icons on each message."""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial

from PySide6.QtCore import (QAbstractItemModel, QEvent, QModelIndex, QPersistentModelIndex, QPoint, QRect, Qt, QTimer,
                            QUrl, Signal)
from PySide6.QtGui import (QAction, QCursor, QDesktopServices, QGuiApplication, QKeyEvent, QKeySequence, QMouseEvent,
                           QPainter, QPaintEvent, QPalette, QResizeEvent, QWheelEvent)
from PySide6.QtWidgets import QAbstractItemView, QFrame, QListView, QMenu, QStyleOptionViewItem, QToolTip, QWidget

from app.core.attachments import SourceRef
from app.core.conversation import MessageState, Role
from app.ui.state.bridge import FramePacer
from app.ui.messages.code_blocks import STEP
from app.ui.messages.markdown import code_from_href
from app.ui.messages.message_actions import COPIED_TIP, Offered
from app.ui.messages.message_delegate import MessageDelegate
from app.ui.messages.message_documents import source_from_href
from app.ui.messages.message_memories import used_words
from app.ui.state.message_words import source_label
from app.ui.state.message_model import MessageListModel
from app.ui.messages.message_pointer import MessagePointer
from app.ui.messages.message_selection import MessageList, SelectableText
from app.ui.messages.tool_parts import call_from_href, message_markdown

COPIED_MS = 1500  # how long a copy icon shows its tick
HERE_WORDS = "Ask anything. Answers are written on this computer;\nnothing you type leaves it."
# Over the empty chat's words while the chat is a temporary one (the sidebar says it too, all along).
TEMPORARY_WORDS = ("Temporary chat: not saved, no memory.\nIt is not kept in your chats and is gone "
                   "once you leave it.")


class MessageView(MessageList):
    """Stays at the bottom while an answer streams, unless the user scrolled up.

    A growing answer (a row whose text alone changed) is drawn on `pacer`'s clock, not at
    every change: more often when drawing it is cheap, less when it is dear. A frame
    repaints that row only, and lays the list out again only when the row grew taller.
    The model's rows are a long chat's newest messages; the view asks it for older ones
    when the user scrolls up to them.

    Each message has icons under it (delegate.action_rects; run_action does what one
    does). A click on its text, Enter or Ctrl+A opens a SelectableText over that text
    (open_selection) for a partial copy; Escape or a click elsewhere closes it. Keys on
    the current message: Ctrl+C copies it as written, F2 edits the user's, Ctrl+Shift+R remembers
    from it (where the delegate `offered` edit and remember: the icons, the menu and the keys offer
    the same actions). A code block
    wider than the column (when code does not wrap) scrolls sideways: a sideways wheel or
    Shift+wheel over it, a drag of its small bar, Left/Right on the current message.
    Signals: regenerateRequested(), editRequested(message id, text), sourceChosen(SourceRef: a
    chip of an answer's Sources row clicked, or chosen in its menu), imageChosen(AttachedImage),
    memoriesChosen(Message: an answer's "used N memories" clicked, or chosen in its menu),
    rememberRequested(Message, text: the text selected in it, else all of it), readAloudRequested(Message:
    an answer's speaker, or its Stop while it is read: set_reading). `delegate` has `dark`, `clear()` (after a
    theme change) and `streaming_note`.
    """

    regenerateRequested = Signal()
    editRequested = Signal(int, str)
    sourceChosen = Signal(object)
    imageChosen = Signal(object)  # an AttachedImage: a thumbnail clicked, or chosen in the menu
    memoriesChosen = Signal(object)  # the answer (a Message) whose "used N memories" was clicked or chosen
    rememberRequested = Signal(object, str)  # a Message, and what of it to start from
    readAloudRequested = Signal(object)  # the answer (a Message) whose speaker (or Stop) was pressed

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        # First: Qt calls the overrides below from the setters that follow.
        self.pacer = FramePacer()
        self._empty_words = HERE_WORDS  # what the empty chat says (set_answers_from, set_temporary)
        self._where_words = HERE_WORDS
        self._temporary = False
        # The text last selected in a message's open text (its row, the text): a click on that message's
        # Remember icon closes the text and starts from what was selected.
        self._picked: tuple[int, str] | None = None
        self._growing: list[QPersistentModelIndex] = []
        # Row -> the height the list was last laid out with, for the rows that grew.
        self._laid_out: dict[int, int] = {}
        self._growth_timer = QTimer(self)
        self._growth_timer.setSingleShot(True)
        self._growth_timer.timeout.connect(self.redraw_growing)
        self._frame_pending = False
        self._exposed: QRect | None = None
        self.setObjectName("messages")
        self.setFrameShape(QFrame.Shape.NoFrame)  # the column's own spacing sets it apart
        self.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setResizeMode(QListView.ResizeMode.Adjust)
        self.setWordWrap(True)
        self.setMouseTracking(True)
        self.setAccessibleName("Messages")
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._context_menu)
        self.delegate = MessageDelegate(self)
        self.setItemDelegate(self.delegate)
        self.delegate.set_width(self.viewport().width())
        self.pointer = MessagePointer(self, self.delegate)
        self._selection: QPersistentModelIndex | None = None
        self._copied_timer = QTimer(self)
        self._copied_timer.setSingleShot(True)
        self._copied_timer.timeout.connect(self._copied_over)
        self._follow = True
        self.verticalScrollBar().valueChanged.connect(self._scrolled)
        self.verticalScrollBar().rangeChanged.connect(self._range_changed)
        self._add_shortcuts()

    def setModel(self, model: QAbstractItemModel | None) -> None:  # Override QListView.setModel.
        assert model is not None, "the list always shows a chat's messages"
        super().setModel(model)
        self.delegate.watch(model)
        model.modelReset.connect(self._reset)
        model.rowsInserted.connect(self._rows_inserted)
        self._reset()

    def _rows_inserted(self) -> None:
        if self._follow:
            self.scrollToBottom()

    def _reset(self) -> None:
        self._growing.clear()
        self._laid_out.clear()
        self._growth_timer.stop()
        self.delegate.forget_rows()
        self._selection = None
        self._picked = None
        self._follow = True
        self.scrollToBottom()

    def _show_older(self) -> None:
        """The user scrolled up to the oldest message shown: show older ones above it, in place."""
        model = self.model()
        assert isinstance(model, MessageListModel)
        more = model.show_older()
        if not more:
            return
        # The rows that grew keep their heights under their new numbers.
        self._laid_out = {row + more: height for row, height in self._laid_out.items()}
        option = QStyleOptionViewItem()
        added = sum(self.delegate.sizeHint(option, model.index(row, 0)).height() for row in range(more))
        self.executeDelayedItemsLayout()
        bar = self.verticalScrollBar()
        bar.setValue(bar.value() + added)

    # --- following the end ------------------------------------------------------------

    def scroll_to_end(self) -> None:
        """Jump to the newest message and keep following it."""
        self._follow = True
        self.scrollToBottom()

    def _scrolled(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._follow = value >= bar.maximum() - 4
        if value < self.viewport().height():
            self._show_older()

    def _range_changed(self, _minimum: int, maximum: int) -> None:
        if self._follow:
            self.verticalScrollBar().setValue(maximum)

    # --- a growing answer --------------------------------------------------------------

    def dataChanged(self, top_left: QModelIndex | QPersistentModelIndex,  # Override QListView.dataChanged.
                    bottom_right: QModelIndex | QPersistentModelIndex, roles: Sequence[int] = ()) -> None:
        # QListView lays out every row for any change; a growing answer waits for its frame.
        if top_left == bottom_right and [int(role) for role in roles] == [int(Qt.ItemDataRole.DisplayRole)]:
            self._growing.append(QPersistentModelIndex(top_left))
            if not self._growth_timer.isActive():
                self._growth_timer.start(self.pacer.delay_ms(_now_ms()))
            return
        super().dataChanged(top_left, bottom_right, roles)

    def redraw_growing(self) -> None:
        """Draw the answers that grew since the last frame (the pacer's timer calls this)."""
        self._growth_timer.stop()
        started = _now_ms()
        growing, self._growing = self._growing, []
        model = self.model()
        for row in sorted({index.row() for index in growing if index.isValid()}):
            index = model.index(row, 0)
            height = self.delegate.sizeHint(QStyleOptionViewItem(), index).height()
            changed = self.delegate.growth_rect(index, self.visualRect(index))
            # visualRect() has the new height at the old place: the rows below, the scroll
            # range and which rows a paint event meets move only when the list is laid out
            # again (QListView keeps no other account of a row's height).
            if self._laid_out.get(row) != height:
                self._laid_out[row] = height
                super().dataChanged(index, index, [Qt.ItemDataRole.DisplayRole])  # Lays the list out.
            else:
                self.viewport().update(changed)
        self.pacer.drawing(started, _now_ms() - started)
        self._frame_pending = True

    def doItemsLayout(self) -> None:  # Override QListView.doItemsLayout: timed for the pacer.
        started = _now_ms()
        super().doItemsLayout()
        model, option = self.model(), QStyleOptionViewItem()
        for row in [row for row in self._laid_out if row < model.rowCount()]:
            self._laid_out[row] = self.delegate.sizeHint(option, model.index(row, 0)).height()
        if self._frame_pending:
            self.pacer.add_cost(_now_ms() - started)

    def resizeEvent(self, event: QResizeEvent) -> None:  # Override QListView.resizeEvent.
        self.delegate.set_width(self.viewport().width())
        super().resizeEvent(event)

    # --- actions --------------------------------------------------------------------

    def current_message(self) -> QModelIndex:
        """The message the keys and the menu act on: the one whose text is open, else the current one."""
        if self._selection is not None and self._selection.isValid():
            return self.model().index(self._selection.row(), 0)
        return self.currentIndex()

    def run_action(self, index: QModelIndex, action: str) -> None:
        """Do what a message's icon does (its copy, regenerate or edit)."""
        self.setCurrentIndex(index)
        if action == "copy":
            self.copy_current()
        elif action == "regenerate":
            self.regenerateRequested.emit()
        elif action == "edit":
            self.edit_current()
        elif action == "remember":
            self.remember_current()
        elif action in ("read-aloud", "stop-reading"):
            self.readAloudRequested.emit(self.delegate.message(index))

    def set_reading(self, speaker: bool, message_id: int | None) -> None:
        """Whether answers have a speaker, and which answer is read aloud now (its speaker becomes a Stop)."""
        offered = Offered.of(self.delegate.offered, speaker=speaker, reading=message_id)
        if not offered.same(self.delegate.offered):
            self.delegate.offered = offered
            self.viewport().update()

    def copy_current(self) -> None:
        """Copy the message as written (an answer's Markdown, the user's words as typed)."""
        index = self.current_message()
        if index.isValid():
            message = self.delegate.message(index)
            QGuiApplication.clipboard().setText(message_markdown(message))
            self._show_copied(message.id)

    def edit_current(self) -> None:
        index = self.current_message()
        if index.isValid() and "edit" in self.delegate.offered:
            message = self.delegate.message(index)
            if message.role == Role.USER:
                self.editRequested.emit(message.id, message.text)

    def remember_current(self) -> None:
        """Remember from the current message: the text selected in it, else all of its text."""
        index = self.current_message()
        if not index.isValid() or "remember" not in self.delegate.offered:
            return
        message = self.delegate.message(index)
        if message.state == MessageState.STREAMING:
            return
        picked = self._picked
        text = picked[1] if picked is not None and picked[0] == index.row() and picked[1].strip() else message.text
        self.rememberRequested.emit(message, text)

    def _show_copied(self, message_id: int | None) -> None:
        self.delegate.copied = message_id
        self.viewport().update()
        if message_id is not None:
            self._copied_timer.start(COPIED_MS)

    def _copied_over(self) -> None:
        self._show_copied(None)

    def copy_code(self, code: str) -> None:
        """A code block's copy link was clicked: exactly its code."""
        QGuiApplication.clipboard().setText(code)
        QToolTip.showText(QCursor.pos(), COPIED_TIP, self)

    def open_link(self, href: str) -> bool:
        """A link in a message was clicked: a code block's copy, a tool result's Show all, or a web or mail address."""
        code = code_from_href(href)
        if code is not None:
            self.copy_code(code)
            return True
        toggle = call_from_href(href)
        if toggle is not None:  # a tool result's "Show all" / "Show less"
            self.delegate.toggle_call(*toggle)
            return True
        url = QUrl(href)
        # Only web and mail links: a model's answer must not open local files.
        if url.scheme() in ("http", "https", "mailto"):
            QDesktopServices.openUrl(url)
            return True
        return False

    # --- wide code blocks ----------------------------------------------------------------

    def wheelEvent(self, event: QWheelEvent) -> None:  # Override: sideways over a wide code block scrolls it.
        pixels, angle = event.pixelDelta(), event.angleDelta()
        shifted = bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier)
        sideways = angle.x() or (angle.y() if shifted else 0)
        if sideways:
            point = event.position().toPoint()
            index = self.indexAt(point)
            number = self.delegate.code_at(index, point) if index.isValid() else None
            if number is not None:
                moved = pixels.x() or (pixels.y() if shifted else 0)
                by = -float(moved) if moved else -sideways / 120 * STEP
                if self.delegate.scroll_code(index, number, by):
                    self.code_moved(index)
                event.accept()
                return
        super().wheelEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # Override: Left/Right scroll the current message's code.
        keys = {Qt.Key.Key_Left: -STEP, Qt.Key.Key_Right: STEP}
        index = self.currentIndex()
        if event.key() in keys and not event.modifiers() and index.isValid():
            shown = self.viewport().rect()
            text = self.delegate.layout(index).text
            moved = False
            for number, strip in enumerate(self.delegate.body_of(index).code_strips()):
                if strip.overflow > 0 and shown.intersects(strip.row.translated(text.topLeft()).toAlignedRect()):
                    moved = self.delegate.scroll_code(index, number, keys[Qt.Key(event.key())]) or moved
            if moved:
                self.code_moved(index)
            event.accept()
            return
        super().keyPressEvent(event)

    def code_moved(self, index: QModelIndex) -> None:
        """A code block of the row was scrolled sideways: paint it (and the editor over it) again."""
        self.viewport().update(self.visualRect(index))
        editor = self.selection_editor()
        if editor is not None and self._selection is not None and self._selection.row() == index.row():
            editor.viewport().update()

    # --- selecting part of a message ----------------------------------------------------

    def open_selection(self, index: QModelIndex | None = None) -> SelectableText | None:
        """Make a message's text selectable (an editor over it); None while it is being written."""
        index = index if index is not None else self.currentIndex()
        if not index.isValid() or self.delegate.message(index).state == MessageState.STREAMING:
            return None
        editor = self.selection_editor()
        if editor is not None and self._selection is not None and self._selection.row() == index.row():
            return editor
        self.close_selection(keep_focus=True)
        self.setCurrentIndex(index)
        self._selection = QPersistentModelIndex(index)
        self.openPersistentEditor(index)
        opened = self.indexWidget(index)
        assert isinstance(opened, SelectableText)
        opened.closeRequested.connect(self._selection_closed)
        self._picked = None
        opened.selectionChanged.connect(partial(self._selection_picked, opened, index.row()))
        opened.linkActivated.connect(self.open_link)
        opened.setFocus(Qt.FocusReason.OtherFocusReason)
        self.viewport().update(self.visualRect(index))
        return opened

    def selection_editor(self) -> SelectableText | None:
        """The open selection editor, if any."""
        if self._selection is None or not self._selection.isValid():
            return None
        editor = self.indexWidget(self.model().index(self._selection.row(), 0))
        return editor if isinstance(editor, SelectableText) else None

    def close_selection(self, keep_focus: bool = False) -> None:
        """Close the selection editor (the text is painted again); the list takes the keys back."""
        selection, self._selection = self._selection, None
        if selection is None or not selection.isValid():
            return
        index = self.model().index(selection.row(), 0)
        had_focus = (editor := self.indexWidget(index)) is not None and editor.hasFocus()
        self.closePersistentEditor(index)
        self.delegate.selecting = None
        self.viewport().update(self.visualRect(index))
        if had_focus and not keep_focus:
            self.setFocus(Qt.FocusReason.OtherFocusReason)

    def _selection_picked(self, editor: SelectableText, row: int) -> None:
        cursor = editor.textCursor()
        if cursor.hasSelection():
            self._picked = (row, cursor.selectedText().replace("\u2029", "\n"))

    def _selection_closed(self) -> None:
        # Later: the editor asks from inside its own event handler.
        QTimer.singleShot(0, self.close_selection)

    def _add_shortcuts(self) -> None:
        copy = QAction("Copy message", self)
        copy.setShortcut(QKeySequence.StandardKey.Copy)
        copy.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        copy.triggered.connect(self.copy_current)
        edit = QAction("Edit message", self)
        edit.setShortcut(QKeySequence(Qt.Key.Key_F2))
        edit.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        edit.triggered.connect(self.edit_current)
        remember = QAction("Remember from this message", self)
        remember.setShortcut(QKeySequence("Ctrl+Shift+R"))
        remember.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        remember.triggered.connect(self.remember_current)
        select = QAction("Select text", self)
        select.setShortcuts([QKeySequence(Qt.Key.Key_Return), QKeySequence(Qt.Key.Key_Enter)])
        select.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        select.triggered.connect(lambda: self.open_selection())
        select_all = QAction("Select all of the message's text", self)
        select_all.setShortcut(QKeySequence.StandardKey.SelectAll)
        select_all.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        select_all.triggered.connect(self._select_all)
        self.addActions([copy, edit, remember, select, select_all])

    def _select_all(self) -> None:
        editor = self.open_selection()
        if editor is not None:
            editor.selectAll()

    def _context_menu(self, point: QPoint) -> None:
        index = self.indexAt(point)
        if not index.isValid():
            return
        self.setCurrentIndex(index)
        message = self.delegate.message(index)
        menu = QMenu(self)
        menu.addAction("Copy", self.copy_current)
        if message.state != MessageState.STREAMING:
            menu.addAction("Select text", lambda: self.open_selection(index))
        offered = self.delegate.offered
        if self.delegate.is_last_answer(index) and "regenerate" in offered:
            menu.addAction("Regenerate", self.regenerateRequested.emit)
        if message.role == Role.USER and "edit" in offered:
            menu.addAction("Edit and resend…", self.edit_current)
        if "remember" in offered and message.state != MessageState.STREAMING:
            menu.addAction("Remember…", self.remember_current)
        for name, _rect in self.delegate.action_rects(index):
            if name in ("read-aloud", "stop-reading"):
                menu.addAction("Stop reading" if name == "stop-reading" else "Read aloud",
                               partial(self.readAloudRequested.emit, message))
        for source in message.sources:  # the keyboard's way to them (the menu key)
            menu.addAction(f"Source {source_label(source)}…", partial(self.sourceChosen.emit, source))
        for image in message.images:  # and to the images
            menu.addAction(f"View image {image.name}…", partial(self.imageChosen.emit, image))
        if used_words(message) and self.delegate.memories_shown:  # and to the memories an answer used
            menu.addAction(f"Memories this answer used ({len(message.memories):,})…",
                           partial(self.memoriesChosen.emit, message))
        menu.popup(self.viewport().mapToGlobal(point))

    def exposed_rect(self) -> QRect:
        """The part of the viewport being painted now (all of it outside a paint event)."""
        return QRect(self._exposed) if self._exposed is not None else self.viewport().rect()

    @property
    def empty_words(self) -> str:
        """What the view says while its chat is empty."""
        return self._empty_words

    def set_answers_from(self, where: str | None) -> None:
        """Where the chat's answers are written: None, this computer (nothing typed leaves it); else
        the server a remote model runs on, named, so the empty chat never promises what is not so."""
        self._where_words = HERE_WORDS if where is None else (f"Ask anything. Your messages go to {where},\n"
                                                              "which writes the answers.")
        self._say_empty()

    def set_temporary(self, temporary: bool) -> None:
        """The chat is a temporary one: its empty view says so first."""
        self._temporary = temporary
        self._say_empty()

    def _say_empty(self) -> None:
        words = f"{TEMPORARY_WORDS}\n\n{self._where_words}" if self._temporary else self._where_words
        if words != self._empty_words:
            self._empty_words = words
            self.viewport().update()

    def paintEvent(self, event: QPaintEvent) -> None:  # Override: an empty chat says what it is for.
        started = _now_ms()
        self._exposed = event.rect()
        try:
            super().paintEvent(event)
        finally:
            self._exposed = None
        if self._frame_pending:
            self._frame_pending = False
            self.pacer.add_cost(_now_ms() - started)
        if self.model() is not None and self.model().rowCount() == 0:
            painter = QPainter(self.viewport())
            painter.setPen(self.palette().color(QPalette.ColorRole.PlaceholderText))
            painter.drawText(self.viewport().rect(), Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap,
                             self._empty_words)
            painter.end()

    def viewportEvent(self, event: QEvent) -> bool:  # Override: links and the thinking header open on click.
        if isinstance(event, QMouseEvent) and event.type() == QEvent.Type.MouseButtonRelease \
                and event.button() == Qt.MouseButton.LeftButton:
            point = event.position().toPoint()
            index = self.indexAt(point)
            if index.isValid() and self.delegate.thinking_header_at(index, point):
                self.delegate.toggle_thinking(index)
                return True
            if index.isValid() and self.delegate.memories_at(index, point):
                self.memoriesChosen.emit(self.delegate.message(index))
                return True
            image = self.delegate.image_at(index, point) if index.isValid() else None
            if image is not None:
                self.imageChosen.emit(self.delegate.message(index).images[image])
                return True
            source = self._source_at(index, point) if index.isValid() else None
            if source is not None:
                self.sourceChosen.emit(source)
                return True
            if index.isValid() and self.open_link(self.delegate.anchor_at(index, point)):
                return True
        return super().viewportEvent(event)

    def _source_at(self, index: QModelIndex, point: QPoint) -> SourceRef | None:
        """The source under a point: a chip of the Sources row, or a "[1]" in the answer's text."""
        message = self.delegate.message(index)
        if message.role != Role.ASSISTANT or not message.sources:
            return None
        chip = self.delegate.chip_at(index, point)
        return message.sources[chip] if chip is not None else source_from_href(
            self.delegate.anchor_at(index, point), message.sources)


def _now_ms() -> float:
    return time.perf_counter() * 1000
