"""Long code lines stay inside the reading column: they wrap in their block (the default), or the
block keeps them and scrolls sideways (View → Wrap long code lines off), at 800×600 in both themes;
copying, selecting and the copy button give the lines as written either way."""

from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QColor, QGuiApplication, QImage, QPalette, QWheelEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from app.core.conversation import Message, MessageState, Role
from app.core.paths import data_paths
from app.core.settings import SettingsFile
from app.ui.common.theme import apply_theme
from app.ui.messages.code_blocks import bar_rects
from app.ui.messages.message_view import MessageView
from app.ui.state.message_model import MessageListModel
from tests.ui.conftest import run, until

LONG = ("    return some_function_with_a_long_name(argument_one, argument_two, argument_three, "
        "argument_four, argument_five)")
BLOB = "    token = '" + "x" * 150 + "'"  # no space to break at
CODE = f"def f():\n{LONG}\n{BLOB}"
ANSWER = f"Here it is:\n\n```python\n{CODE}\n```\n\nThat is all."
# The chat pane's width in an 800×600 window: the window less the chat list beside it.
PANE = (800 - 270, 560)


@pytest.fixture(params=["light", "dark"])
def view(request, qtbot):
    app = QApplication.instance()
    before = QPalette(app.palette())
    dark = apply_theme(app, request.param)
    model = MessageListModel()
    model.reset_to([Message(1, 1, Role.USER, "Show me.", 0.0, MessageState.COMPLETE, None),
                    Message(2, 1, Role.ASSISTANT, ANSWER, 0.0, MessageState.COMPLETE, None)])
    view = MessageView()
    view.delegate.dark = dark
    view.setModel(model)
    view.resize(*PANE)
    qtbot.addWidget(view)
    view.show()
    qtbot.waitExposed(view)
    QTest.qWait(20)
    yield view
    app.setPalette(before)


def _answer(view: MessageView):
    return view.model().index(1, 0)


def _strip(view: MessageView):
    """The answer's code block in viewport coordinates: (its lines row, its strip)."""
    index = _answer(view)
    text = view.delegate.layout(index).text
    strip = view.delegate.body_of(index).code_strips()[0]
    return strip.row.translated(QPointF(text.topLeft())).toAlignedRect(), strip


def _ink_right_of(image: QImage, x: int, rows: range, base: QColor) -> list[tuple[int, int]]:
    return [(column, row) for row in rows for column in range(x, image.width()) if image.pixelColor(column, row) != base]


@pytest.mark.parametrize("wrap", [True, False])
def test_no_code_block_paints_past_the_column(view, wrap: bool) -> None:
    view.delegate.set_wrap_code(wrap)
    QTest.qWait(20)
    index = _answer(view)
    column = view.delegate.layout(index).column
    row, strip = _strip(view)
    assert row.right() <= column.right() and strip.window.right() <= column.width()
    assert (strip.overflow > 0) == (not wrap), "kept lines are wider than the block; wrapped ones are not"
    image = view.viewport().grab().toImage()
    base = view.palette().color(QPalette.ColorRole.Base)
    assert _ink_right_of(image, column.right() + 1, range(row.top(), row.bottom() + 1), base) == []
    # Scrolled to its end, the block still stops at the column.
    if not wrap:
        view.delegate.scroll_code(index, 0, 10_000)
        view.viewport().repaint()
        image = view.viewport().grab().toImage()
        assert _ink_right_of(image, column.right() + 1, range(row.top(), row.bottom() + 1), base) == []


def test_wrapped_lines_go_on_under_themselves_and_the_kept_ones_do_not(view) -> None:
    index = _answer(view)
    wrapped = view.delegate.body_of(index)
    assert view.delegate.wrap_code, "wrapping is the default"
    view.delegate.set_wrap_code(False)
    kept = view.delegate.body_of(index)
    assert wrapped.height > kept.height + 2 * view.fontMetrics().height()
    # A wrapped line is still one line of the document: the copy gives it whole.
    for body in (wrapped, kept):
        lines = [block.text() for document in body.documents for block in _blocks(document)]
        assert LONG.replace(" ", "\u00a0") in [line.replace(" ", "\u00a0") for line in lines]


def _blocks(document):
    block = document.begin()
    while block.isValid():
        yield block
        block = block.next()


def test_shift_wheel_keys_and_the_bar_scroll_a_wide_block(view) -> None:
    view.delegate.set_wrap_code(False)
    QTest.qWait(20)
    index = _answer(view)
    row, strip = _strip(view)
    offsets = view.delegate.code_offsets
    before = view.viewport().grab().toImage()
    inside = QPointF(row.center())
    wheel = QWheelEvent(inside, QPointF(view.viewport().mapToGlobal(row.center())), QPoint(), QPoint(0, -120),
                        Qt.MouseButton.NoButton, Qt.KeyboardModifier.ShiftModifier, Qt.ScrollPhase.NoScrollPhase,
                        False)
    QApplication.sendEvent(view.viewport(), wheel)
    assert offsets[2][0] > 0
    QTest.qWait(10)
    assert view.viewport().grab().toImage() != before, "the block shows another part of its lines"
    assert view.verticalScrollBar().value() == view.verticalScrollBar().value()
    view.setFocus()
    view.setCurrentIndex(index)
    QTest.keyClick(view, Qt.Key.Key_Left)
    QTest.keyClick(view, Qt.Key.Key_Left)
    assert offsets[2][0] == 0
    QTest.keyClick(view, Qt.Key.Key_Right)
    assert offsets[2][0] > 0
    track, _thumb = bar_rects(strip, 0.0)
    text = view.delegate.layout(index).text
    bar_y = round(text.top() + track.center().y())
    start, end = QPoint(round(text.left() + track.left() + 2), bar_y), QPoint(round(text.left() + track.right()), bar_y)
    QTest.mousePress(view.viewport(), Qt.MouseButton.LeftButton, pos=start)
    QTest.mouseMove(view.viewport(), end)
    QTest.mouseRelease(view.viewport(), Qt.MouseButton.LeftButton, pos=end)
    assert offsets[2][0] == pytest.approx(strip.overflow)
    assert view.selection_editor() is None, "dragging the bar is not selecting text"


@pytest.mark.parametrize("wrap", [True, False])
def test_the_copy_button_and_a_selection_copy_the_lines_as_written(view, wrap: bool) -> None:
    view.delegate.set_wrap_code(wrap)
    QTest.qWait(20)
    index = _answer(view)
    text = view.delegate.layout(index).text
    document = view.delegate.body_of(index).documents[0]
    found = document.find("Copy")
    block = found.block()
    line = block.layout().lineAt(0)
    x = line.cursorToX(found.selectionStart() - block.position())
    x = x[0] if isinstance(x, tuple) else x
    place = document.documentLayout().blockBoundingRect(block)
    copy_at = QPointF(place.left() + x + 4, place.top() + line.y() + line.height() / 2)
    QGuiApplication.clipboard().clear()
    QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=(copy_at + QPointF(text.topLeft())).toPoint())
    assert QGuiApplication.clipboard().text() == CODE
    editor = view.open_selection(index)
    editor.selectAll()
    editor.copy_text()
    assert CODE in QGuiApplication.clipboard().text()
    editor.copy_markdown()
    assert f"```python\n{CODE}\n```" in QGuiApplication.clipboard().text()


@pytest.mark.parametrize("wrap", [True, False])
def test_the_selection_editor_paints_the_block_as_the_list_does(view, wrap: bool) -> None:
    view.delegate.set_wrap_code(wrap)
    QTest.qWait(20)
    index = _answer(view)
    if not wrap:
        view.delegate.scroll_code(index, 0, 150)
    view.viewport().repaint()
    painted = view.viewport().grab().toImage()
    editor = view.open_selection(index)
    QTest.qWait(20)
    assert view.selection_editor() is editor and editor.isVisible()
    opened = view.viewport().grab().toImage()
    row, _strip_ = _strip(view)
    caret = editor.cursorRect().translated(editor.pos()).adjusted(-2, -2, 2, 2)
    differ = [(x, y) for y in range(row.top(), row.bottom()) for x in range(row.left(), row.right())
              if painted.pixel(x, y) != opened.pixel(x, y) and not caret.contains(x, y)]
    assert len(differ) < 20, "the same lines at the same offset"


def test_a_drag_over_a_scrolled_block_selects_what_is_under_the_mouse(view) -> None:
    view.delegate.set_wrap_code(False)
    QTest.qWait(20)
    index = _answer(view)
    view.delegate.scroll_code(index, 0, 200)
    view.viewport().update()
    text = view.delegate.layout(index).text
    document = view.delegate.body_of(index).documents[0]
    found = document.find("argument_three")
    block = found.block()
    line = block.layout().lineAt(0)
    top = document.documentLayout().blockBoundingRect(block).top() + line.y() + line.height() / 2
    left = document.documentLayout().blockBoundingRect(block).left()

    def at(position: int) -> QPoint:
        x = line.cursorToX(position - block.position())
        x = x[0] if isinstance(x, tuple) else x
        return QPoint(round(text.left() + left + x - 200), round(text.top() + top))

    start, end = at(found.selectionStart()), at(found.selectionEnd())
    assert text.left() < start.x() < end.x() < text.right(), "the word shows in the block's window"
    QTest.mousePress(view.viewport(), Qt.MouseButton.LeftButton, pos=start)
    for step in range(1, 6):
        QTest.mouseMove(view.viewport(), start + (end - start) * step / 5)
    QTest.mouseRelease(view.viewport(), Qt.MouseButton.LeftButton, pos=end)
    assert view.selection_editor().textCursor().selectedText() == "argument_three"


@pytest.mark.slow
def test_the_choice_is_in_the_view_menu_and_kept_across_a_restart(make_window, loop) -> None:
    first = make_window(model=None)
    run(loop, until(lambda: first.messages.delegate.wrap_code, what="the settings read"))
    toggle = first.menu_actions.wrap_code
    assert toggle.isCheckable() and toggle.isChecked() and toggle in first.menuBar().actions()[2].menu().actions()
    toggle.trigger()
    assert not first.messages.delegate.wrap_code
    settings = data_paths().settings_file
    run(loop, until(lambda: settings.is_file() and not SettingsFile(settings).load().wrap_code, what="the saved choice"))
    first.quit()
    again = make_window(model=None)
    run(loop, until(lambda: not again.messages.delegate.wrap_code, what="the choice read back"))
    assert not again.menu_actions.wrap_code.isChecked()
    # And a choice made elsewhere (the settings changed) is followed.
    door = again.doors.settings
    run(loop, door.update_settings(dataclasses.replace(door.settings, wrap_code=True)))
    run(loop, until(lambda: again.messages.delegate.wrap_code, what="the change followed"))
    assert again.menu_actions.wrap_code.isChecked()
