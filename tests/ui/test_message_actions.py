"""The icons under each message: always there, with tooltips, highlighted under the mouse, and
they copy, regenerate and edit; the keys do the same."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent, QPoint, Qt
from PySide6.QtGui import QColor, QGuiApplication, QHelpEvent, QImage
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QStyleOptionViewItem, QToolTip

from app.core.answer_stats import AnswerStats, FinishReason
from app.core.conversation import Message, MessageState, Role
from app.ui.messages.message_actions import COPIED_TIP, TIPS
from app.ui.state.message_model import MessageListModel
from app.ui.messages.message_view import MessageView

STATS = AnswerStats(ttft_ms=80.0, tokens_per_s=40.0, tokens=12, device="CPU", finish_reason=FinishReason.STOP)


def _message(number: int, role: Role, text: str, state: MessageState = MessageState.COMPLETE) -> Message:
    return Message(number, 1, role, text, 0.0, state, STATS if role == Role.ASSISTANT else None)


@pytest.fixture
def view(qtbot) -> MessageView:
    model = MessageListModel()
    model.reset_to([_message(1, Role.USER, "First question"), _message(2, Role.ASSISTANT, "First **answer**."),
                    _message(3, Role.USER, "Second question"), _message(4, Role.ASSISTANT, "Second answer.")])
    view = MessageView()
    view.setModel(model)
    view.resize(900, 700)
    qtbot.addWidget(view)
    view.show()
    qtbot.waitExposed(view)
    QTest.qWait(20)
    return view


def _rects(view: MessageView, row: int) -> dict:
    return dict(view.delegate.action_rects(view.model().index(row, 0)))


def _shown(view: MessageView) -> QImage:
    return view.viewport().grab().toImage()


def _ink(image: QImage, rect, background: QColor) -> int:
    """How many pixels in rect differ from the background (an icon's strokes)."""
    return sum(image.pixelColor(x, y) != background for x in range(rect.left(), rect.right() + 1)
               for y in range(rect.top(), rect.bottom() + 1))


def test_each_message_has_its_icons_always_visible(view) -> None:
    assert list(_rects(view, 0)) == ["copy", "edit", "remember"]
    assert list(_rects(view, 1)) == ["copy", "remember"], "an earlier answer is not regenerated"
    assert list(_rects(view, 2)) == ["copy", "edit", "remember"]
    assert list(_rects(view, 3)) == ["copy", "regenerate", "remember"]
    image = _shown(view)
    background = view.palette().color(view.viewport().backgroundRole())
    for row in range(4):
        for name, rect in _rects(view, row).items():
            assert _ink(image, rect, background) > 20, f"{name} on row {row} is drawn without the mouse over it"


def test_the_users_icons_sit_under_the_bubble_at_the_right_and_the_answers_at_the_left(view) -> None:
    user, answer = view.delegate.layout(view.model().index(0, 0)), view.delegate.layout(view.model().index(1, 0))
    assert _rects(view, 0)["remember"].right() == user.bubble.right()
    assert abs(_rects(view, 1)["copy"].center().x() - answer.text.left()) < 16
    assert all(rect.top() > user.bubble.bottom() for rect in _rects(view, 0).values())


def test_an_answer_being_written_has_no_icons_yet(qtbot) -> None:
    model = MessageListModel()
    model.reset_to([_message(1, Role.USER, "Hi"), _message(2, Role.ASSISTANT, "Hel", MessageState.STREAMING)])
    view = MessageView()
    view.setModel(model)
    qtbot.addWidget(view)
    assert _rects(view, 1) == {}


def test_clicking_copy_copies_the_message_and_shows_a_tick(view) -> None:
    QGuiApplication.clipboard().clear()
    rect = _rects(view, 1)["copy"]
    before = _shown(view).copy(rect)
    QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert QGuiApplication.clipboard().text() == "First **answer**."
    assert view.delegate.copied == 2
    QTest.qWait(20)
    assert _shown(view).copy(rect) != before, "the icon turned into a tick"
    event = QHelpEvent(QEvent.Type.ToolTip, rect.center(), view.viewport().mapToGlobal(rect.center()))
    assert view.delegate.helpEvent(event, view, QStyleOptionViewItem(), view.model().index(1, 0))
    assert QToolTip.text() == COPIED_TIP


def test_clicking_regenerate_and_edit_asks_for_them(view, qtbot) -> None:
    with qtbot.waitSignal(view.regenerateRequested, timeout=1000):
        QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=_rects(view, 3)["regenerate"].center())
    with qtbot.waitSignal(view.editRequested, timeout=1000) as edited:
        QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=_rects(view, 2)["edit"].center())
    assert edited.args == [3, "Second question"]


def test_a_press_that_leaves_the_icon_does_nothing(view, qtbot) -> None:
    rect = _rects(view, 3)["regenerate"]
    asked = []
    view.regenerateRequested.connect(lambda: asked.append(True))
    QTest.mousePress(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    QTest.mouseRelease(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center() + QPoint(0, 60))
    assert asked == []


def test_each_icon_has_a_tooltip(view) -> None:
    for row, name in [(0, "copy"), (0, "edit"), (3, "regenerate")]:
        point = _rects(view, row)[name].center()
        event = QHelpEvent(QEvent.Type.ToolTip, point, view.viewport().mapToGlobal(point))
        assert view.delegate.helpEvent(event, view, QStyleOptionViewItem(), view.model().index(row, 0))
        assert QToolTip.text() == TIPS[name]
    assert "Ctrl+R" in TIPS["regenerate"] and "F2" in TIPS["edit"] and "Ctrl+C" in TIPS["copy"]
    assert "Ctrl+Shift+R" in TIPS["remember"]


def test_the_icon_under_the_mouse_is_highlighted(view) -> None:
    rect = _rects(view, 3)["regenerate"]
    before = _shown(view).copy(rect)
    QTest.mouseMove(view.viewport(), rect.center())
    QTest.qWait(20)
    assert view.delegate.hovered == (4, "regenerate")
    assert view.viewport().cursor().shape() == Qt.CursorShape.PointingHandCursor
    assert _shown(view).copy(rect) != before
    QTest.mouseMove(view.viewport(), QPoint(5, 5))
    QTest.qWait(20)
    assert view.delegate.hovered is None and _shown(view).copy(rect) == before


def test_the_icons_are_drawn_for_the_screens_pixel_ratio(view) -> None:
    """At 200% the icons are drawn from pixmaps of twice the pixels, not scaled up."""
    image = QImage(view.viewport().size() * 2, QImage.Format.Format_ARGB32)
    image.setDevicePixelRatio(2.0)
    image.fill(QColor("white"))
    view.viewport().render(image)
    assert 2.0 in view.delegate.icon_ratios()


def test_a_screen_reader_hears_the_keys_for_the_painted_icons(view) -> None:
    description = Qt.ItemDataRole.AccessibleDescriptionRole
    assert "F2" in view.model().index(0, 0).data(description)
    assert "Ctrl+R" in view.model().index(3, 0).data(description)
    assert "Ctrl+R" not in view.model().index(1, 0).data(description), "not an earlier answer"


def test_the_keys_copy_and_edit_the_current_message(view, qtbot) -> None:
    view.setFocus()
    view.setCurrentIndex(view.model().index(2, 0))
    QGuiApplication.clipboard().clear()
    QTest.keyClick(view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QGuiApplication.clipboard().text() == "Second question"
    with qtbot.waitSignal(view.editRequested, timeout=1000) as edited:
        QTest.keyClick(view, Qt.Key.Key_F2)
    assert edited.args == [3, "Second question"]
