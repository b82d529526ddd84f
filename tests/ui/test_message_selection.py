"""Selecting part of a message with the mouse or the keys, and copying it as text or Markdown."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QGuiApplication, QTextDocument, QWheelEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QLineEdit, QVBoxLayout, QWidget

from app.core.conversation import Message, MessageState, Role
from app.ui.messages.markdown import COPY_SCHEME, markdown_to_html, plain_to_html
from app.ui.state.message_model import MessageListModel
from app.ui.messages.message_selection import MARKDOWN_MIME, SelectableText
from app.ui.messages.message_view import MessageView

ANSWER = ("Here is **bold** and *light* text, with a [link](https://example.com).\n\n"
          "```python\ndef total(path):\n    return 42\n```\n\nThe end.")
QUESTION = "How do I add up numbers?"


def _message(number: int, role: Role, text: str, state: MessageState = MessageState.COMPLETE) -> Message:
    return Message(number, 1, role, text, 0.0, state, None)


@pytest.fixture
def window(qtbot) -> QWidget:
    """A message list over an answer, and a field beside it to take the focus away."""
    model = MessageListModel()
    model.reset_to([_message(1, Role.USER, QUESTION), _message(2, Role.ASSISTANT, ANSWER)])
    window = QWidget()
    layout = QVBoxLayout(window)
    window.view = MessageView()
    window.view.setModel(model)
    window.field = QLineEdit()
    layout.addWidget(window.view)
    layout.addWidget(window.field)
    window.resize(900, 700)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    QTest.qWait(20)
    return window


def _point(view: MessageView, row: int, text: str, after: bool = False) -> QPoint:
    """Where the first `text` starts (or ends) in a row's painted text, in viewport coordinates."""
    index = view.model().index(row, 0)
    message, place = view.delegate.message(index), view.delegate.layout(index).text
    document = QTextDocument()
    document.setDefaultFont(view.font())
    document.setDocumentMargin(0)
    document.setHtml(markdown_to_html(message.text) if message.role == Role.ASSISTANT else plain_to_html(message.text))
    document.setTextWidth(place.width())
    document.size()  # laid out now: a block's lines exist only once it is
    found = document.find(text)
    position = found.selectionEnd() if after else found.selectionStart()
    block = document.findBlock(position)
    top = document.documentLayout().blockBoundingRect(block).top()
    lines = block.layout()
    line = lines.lineForTextPosition(position - block.position())
    x = line.cursorToX(position - block.position())
    x = x[0] if isinstance(x, tuple) else x
    return QPoint(place.left() + round(x), place.top() + round(top + line.y() + line.height() / 2))


def _drag(view: MessageView, start: QPoint, end: QPoint) -> None:
    QTest.mousePress(view.viewport(), Qt.MouseButton.LeftButton, pos=start)
    for step in range(1, 6):
        QTest.mouseMove(view.viewport(), start + (end - start) * step / 5)
    QTest.mouseRelease(view.viewport(), Qt.MouseButton.LeftButton, pos=end)


def test_a_mouse_drag_selects_part_of_an_answer_and_ctrl_c_copies_it(window) -> None:
    view = window.view
    _drag(view, _point(view, 1, "bold"), _point(view, 1, "light", after=True))
    editor = view.selection_editor()
    assert isinstance(editor, SelectableText) and editor.hasFocus()
    assert editor.textCursor().selectedText() == "bold and light"
    QGuiApplication.clipboard().clear()
    QTest.keyClick(editor, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QGuiApplication.clipboard().text() == "bold and light"
    assert bytes(QGuiApplication.clipboard().mimeData().data(MARKDOWN_MIME)).decode() == "**bold** and *light*"


def test_copy_as_markdown_from_the_menu_keeps_the_marks_and_the_code_fence(window) -> None:
    view = window.view
    _drag(view, _point(view, 1, "light"), _point(view, 1, "The end", after=True))
    editor = view.selection_editor()
    menu = editor.context_menu()
    actions = {action.text(): action for action in menu.actions() if action.text()}
    assert list(actions) == ["Copy", "Copy as Markdown", "Select all"] and actions["Copy"].isEnabled()
    actions["Copy as Markdown"].trigger()
    assert QGuiApplication.clipboard().text() == (
        "*light* text, with a [link](https://example.com).\n\n```python\ndef total(path):\n    return 42\n```\n\n"
        "The end")
    actions["Copy"].trigger()
    assert QGuiApplication.clipboard().text() == (
        "light text, with a link.\n\ndef total(path):\n    return 42\n\nThe end")


def test_the_keys_open_the_text_select_part_of_it_copy_and_close(window) -> None:
    view = window.view
    view.setFocus()
    view.setCurrentIndex(view.model().index(0, 0))
    QTest.keyClick(view, Qt.Key.Key_Return)
    editor = view.selection_editor()
    assert editor is not None and editor.hasFocus()
    QTest.keyClick(editor, Qt.Key.Key_Home, Qt.KeyboardModifier.ControlModifier)
    for _ in range(6):
        QTest.keyClick(editor, Qt.Key.Key_Right, Qt.KeyboardModifier.ShiftModifier)
    QGuiApplication.clipboard().clear()
    QTest.keyClick(editor, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QGuiApplication.clipboard().text() == "How do"
    QTest.keyClick(editor, Qt.Key.Key_Escape)
    QTest.qWait(10)
    assert view.selection_editor() is None and view.hasFocus()
    assert view.currentIndex().row() == 0
    # Ctrl+A on the list selects all of the current message's text.
    QTest.keyClick(view, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClick(view.selection_editor(), Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QGuiApplication.clipboard().text() == QUESTION


def test_the_editor_lies_exactly_over_the_painted_text(window) -> None:
    view = window.view
    index = view.model().index(1, 0)
    painted = view.viewport().grab().toImage()
    editor = view.open_selection(index)
    QTest.qWait(20)
    assert editor.geometry() == view.delegate.layout(index).text
    opened = view.viewport().grab().toImage()
    # The caret is all the editor adds; at its edges a glyph's anti-aliasing may lose a pixel
    # the painted text spilled past its box.
    caret = editor.cursorRect().translated(editor.pos()).adjusted(-2, -2, 2, 2)
    box = editor.geometry()
    differ = [(x, y) for y in range(painted.height()) for x in range(painted.width())
              if painted.pixel(x, y) != opened.pixel(x, y)
              and not caret.contains(x, y) and x not in (box.left() - 1, box.right() + 1)]
    assert differ == []


def test_a_click_elsewhere_or_leaving_the_list_closes_it(window) -> None:
    view = window.view
    _drag(view, _point(view, 1, "bold"), _point(view, 1, "bold", after=True))
    assert view.selection_editor() is not None
    QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(5, 5))
    assert view.selection_editor() is None
    _drag(view, _point(view, 0, "add"), _point(view, 0, "up", after=True))
    assert view.selection_editor().textCursor().selectedText() == "add up"
    window.field.setFocus(Qt.FocusReason.MouseFocusReason)
    QTest.qWait(10)
    assert view.selection_editor() is None


def test_the_wheel_over_the_text_scrolls_the_list(window) -> None:
    view = window.view
    view.model().reset_to([_message(n, Role.ASSISTANT, f"Answer {n}\n\n" + "words " * 80) for n in range(1, 30)])
    QTest.qWait(20)
    index = view.model().index(view.model().rowCount() - 1, 0)
    editor = view.open_selection(index)
    bar = view.verticalScrollBar()
    before = bar.value()
    point = QPointF(20, 20)
    wheel = QWheelEvent(point, QPointF(editor.viewport().mapToGlobal(point.toPoint())), QPoint(0, 0), QPoint(0, 120),
                        Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(editor.viewport(), wheel)
    assert bar.value() < before


def test_an_answer_being_written_is_not_opened(window) -> None:
    view = window.view
    view.model().reset_to([_message(1, Role.USER, QUESTION), _message(2, Role.ASSISTANT, ANSWER, MessageState.STREAMING)])
    QTest.qWait(20)
    _drag(view, _point(view, 1, "bold"), _point(view, 1, "light", after=True))
    assert view.selection_editor() is None
    assert view.open_selection(view.model().index(1, 0)) is None


def _copy_link(view: MessageView, row: int) -> QPoint:
    """The code block's Copy link in a row, found the way the mouse finds it."""
    text = view.delegate.layout(view.model().index(row, 0)).text
    for y in range(text.top(), text.bottom(), 3):
        for x in range(text.right() - 80, text.right(), 4):
            if view.delegate.anchor_at(view.model().index(row, 0), QPoint(x, y)).startswith(COPY_SCHEME):
                return QPoint(x, y)
    raise AssertionError("no copy link in the code block")


def test_a_code_blocks_copy_button_copies_exactly_its_code(window) -> None:
    view = window.view
    link = _copy_link(view, 1)
    QGuiApplication.clipboard().clear()
    QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=link)
    assert QGuiApplication.clipboard().text() == "def total(path):\n    return 42"
    assert view.selection_editor() is None, "a click on the button is not the start of a selection"
    # And the same button inside the opened text.
    editor = view.open_selection(view.model().index(1, 0))
    QGuiApplication.clipboard().clear()
    QTest.mouseClick(editor.viewport(), Qt.MouseButton.LeftButton, pos=editor.viewport().mapFrom(view.viewport(), link))
    assert QGuiApplication.clipboard().text() == "def total(path):\n    return 42"


def test_a_link_in_an_answer_opens_in_the_browser(window, monkeypatch) -> None:
    from PySide6.QtGui import QDesktopServices

    opened = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url.toString()) or True)
    view = window.view
    QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=_point(view, 1, "link") + QPoint(3, 0))
    assert opened == ["https://example.com"]
    assert view.selection_editor() is None


def test_a_double_click_on_the_painted_text_selects_a_word(window) -> None:
    """Through the window, as a real mouse: the first click opens the editor, the second lands on it."""
    view = window.view
    point = view.viewport().mapTo(window, _point(view, 1, "light") + QPoint(8, 0))
    handle = window.windowHandle()
    QTest.mouseClick(handle, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, point)
    QTest.mouseDClick(handle, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, point)
    QTest.qWait(20)
    assert view.selection_editor().textCursor().selectedText() == "light"


def test_a_new_theme_closes_the_open_text(window) -> None:
    view = window.view
    view.open_selection(view.model().index(1, 0))
    view.delegate.dark = True
    view.delegate.clear()
    assert view.selection_editor() is None and view.delegate.selecting is None
