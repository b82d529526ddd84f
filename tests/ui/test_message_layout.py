"""The message column: a reading width centred in wide windows, the user's words in bubbles at
the right, answers as text without a box, muted labels, generous space, both themes."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QColor, QImage, QPalette
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from app.core.answer_stats import AnswerStats, FinishReason
from app.core.conversation import Message, MessageState, Role
from app.ui.messages.message_layout import MAX_COLUMN, SIDE, column
from app.ui.state.message_model import MessageListModel
from app.ui.messages.message_view import MessageView
from app.ui.common.theme import apply_theme

STATS = AnswerStats(ttft_ms=80.0, tokens_per_s=40.0, tokens=12, device="CPU", finish_reason=FinishReason.STOP)


@pytest.fixture(params=["light", "dark"])
def view(request, qtbot):
    app = QApplication.instance()
    before = QPalette(app.palette())
    dark = apply_theme(app, request.param)
    model = MessageListModel()
    model.reset_to([Message(1, 1, Role.USER, "A short question?", 0.0, MessageState.COMPLETE, None),
                    Message(2, 1, Role.ASSISTANT, "An answer, long enough to wrap. " * 12, 0.0,
                            MessageState.COMPLETE, STATS)])
    view = MessageView()
    view.delegate.dark = dark
    view.setModel(model)
    view.resize(1400, 700)
    qtbot.addWidget(view)
    view.show()
    qtbot.waitExposed(view)
    QTest.qWait(20)
    yield view
    app.setPalette(before)


def _layouts(view: MessageView) -> tuple:
    return tuple(view.delegate.layout(view.model().index(row, 0)) for row in range(2))


@pytest.mark.parametrize(("width", "expected"), [(1600, (420, MAX_COLUMN)), (700, (SIDE, 700 - 2 * SIDE))])
def test_the_column_has_a_reading_width_centred_in_the_window(width: int, expected: tuple[int, int]) -> None:
    assert column(width) == expected


def test_a_wide_window_centres_the_column_and_the_text_keeps_its_width(view) -> None:
    user, answer = _layouts(view)
    viewport = view.viewport().width()
    assert answer.column.width() == MAX_COLUMN
    assert abs(answer.column.left() - (viewport - answer.column.right() - 1)) <= 1, "centred"
    assert answer.text.left() == answer.column.left() and answer.text.width() == MAX_COLUMN
    assert 720 <= answer.text.width() <= 780


def test_the_users_words_are_in_a_bubble_at_the_right_that_fits_them(view) -> None:
    user, answer = _layouts(view)
    assert user.bubble is not None and answer.bubble is None
    assert user.bubble.right() == user.column.right()
    assert user.bubble.width() < user.column.width() // 2, "a short question makes a small bubble"
    assert user.bubble.contains(user.text)
    image = view.viewport().grab().toImage()
    bubble = view.palette().color(QPalette.ColorRole.AlternateBase)
    base = view.palette().color(QPalette.ColorRole.Base)
    inside = user.bubble.adjusted(4, user.bubble.height() // 2, 0, 0).topLeft()
    assert image.pixelColor(inside) == bubble
    assert image.pixelColor(user.bubble.left() - 3, inside.y()) == base
    # No box behind an answer: its margin is the list's own background.
    assert image.pixelColor(answer.text.left() - 3, answer.text.center().y()) == base


def test_messages_have_room_between_them(view) -> None:
    user, answer = _layouts(view)
    assert answer.author.top() - user.actions.bottom() >= 20
    assert user.author.bottom() < user.bubble.top()


def test_labels_and_stats_are_small_and_muted(view) -> None:
    user, answer = _layouts(view)
    assert user.author.height() < view.fontMetrics().height()
    image = view.viewport().grab().toImage()
    muted = view.palette().color(QPalette.ColorRole.PlaceholderText)
    text = view.palette().color(QPalette.ColorRole.Text)
    base = view.palette().color(QPalette.ColorRole.Base)
    label, stats = _colors(image, answer.author), _colors(image, answer.actions)
    assert _nearest(label, [muted, text], base) == muted and _nearest(stats, [muted, text], base) == muted


def _colors(image: QImage, rect) -> list[QColor]:
    background = image.pixelColor(rect.left() - 2, rect.top())
    return [image.pixelColor(x, y) for x in range(rect.left(), rect.right()) for y in range(rect.top(), rect.bottom())
            if image.pixelColor(x, y) != background]


def _distance(a: QColor, b: QColor) -> int:
    return abs(a.red() - b.red()) + abs(a.green() - b.green()) + abs(a.blue() - b.blue())


def _nearest(ink: list[QColor], choices: list[QColor], background: QColor) -> QColor:
    """The choice the strongest ink (the least blended with the background) is closest to."""
    distance = _distance
    strongest = sorted(ink, key=lambda color: distance(color, background))[:20]
    return min(choices, key=lambda choice: sum(distance(color, choice) for color in strongest))
