"""What a growing answer costs the window: laid out block by block, drawn on a paced clock."""

from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QPoint, QRectF
from PySide6.QtGui import QColor, QImage, QPainter, QTextDocument
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from app.core.answer_stats import AnswerStats
from app.core.conversation import Message, MessageState, Role
from app.ui.state.bridge import FramePacer
from app.ui.messages.markdown import markdown_to_html
from app.ui.messages.message_body import BlockCutter, GrowingAnswer
from app.ui.state.message_model import MessageListModel
from app.ui.messages.message_view import MessageView

ANSWER = ("Here is a **plan**:\n\n1. Read the file\n2. Parse it\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
          "```python\nfor line in open(path):\n\n    total += int(line)\n```\n\n"
          "# A heading\n\nSome text with a [link](https://example.com).\n\n"
          "1. loose\n\n2. list\n\n- a\n\n  continued\n\n> quoted\n\n---\n\nThe end.\n")


# --- the pacer ---------------------------------------------------------------------------


def test_the_first_frame_is_drawn_at_once() -> None:
    assert FramePacer().delay_ms(now_ms=5_000.0) == 0


@pytest.mark.parametrize(("cost_ms", "interval_ms"), [(0.1, 16), (1.0, 20), (2.5, 50), (4.0, 80), (30.0, 100)])
def test_the_interval_keeps_drawing_to_its_share_within_bounds(cost_ms: float, interval_ms: float) -> None:
    pacer = FramePacer(share=0.05, fastest_ms=16, slowest_ms=100)
    pacer.drawing(now_ms=0.0, cost_ms=cost_ms)
    assert pacer.interval_ms() == interval_ms


def test_the_next_frame_waits_for_what_is_left_of_the_interval() -> None:
    pacer = FramePacer(share=0.05, fastest_ms=16, slowest_ms=100)
    pacer.drawing(now_ms=1_000.0, cost_ms=2.0)
    pacer.add_cost(1.0)  # its painting: 3 ms in all, so 60 ms between frames
    assert [pacer.delay_ms(now) for now in (1_000.0, 1_010.0, 1_059.5, 1_060.0, 2_000.0)] == [60, 50, 1, 0, 0]


# --- cutting a growing answer into blocks ---------------------------------------------------


def _pieces(text: str) -> list[str]:
    starts = [0, *BlockCutter().feed(text)]
    return [text[start:end] for start, end in zip(starts, [*starts[1:], len(text)])]


@pytest.mark.parametrize(("text", "pieces"), [
    ("One.\n\nTwo.\n\nThr", ["One.\n\n", "Two.\n\nThr"]),  # the line being written is not cut off
    ("One.\n\nTwo.\n\nThree\n", ["One.\n\n", "Two.\n\n", "Three\n"]),
    ("Code:\n\n```\na\n\nb\n```\n\nAfter\n", ["Code:\n\n", "```\na\n\nb\n```\n\n", "After\n"]),
    ("~~~~\nx\n\n```\n\ny\n~~~~\n\nz\n", ["~~~~\nx\n\n```\n\ny\n~~~~\n\n", "z\n"]),
    ("1. a\n\n2. b\n\nEnd\n", ["1. a\n\n2. b\n\n", "End\n"]),  # a loose list stays one list
    ("- a\n\n  more\n\n      code\n\nEnd\n", ["- a\n\n  more\n\n      code\n\n", "End\n"]),
    ("Intro\n\n- a\n- b\n\nEnd\n", ["Intro\n\n", "- a\n- b\n\n", "End\n"]),
])
def test_an_answer_is_cut_only_between_blocks_that_render_alone(text: str, pieces: list[str]) -> None:
    assert _pieces(text) == pieces


def test_the_cutter_reads_only_what_was_added_and_starts_over_on_new_text() -> None:
    cutter = BlockCutter()
    assert cutter.feed("One.\n\nTw") == []
    assert cutter.feed("One.\n\nTwo.\n") == [6]
    assert cutter.feed("One.\n\nTwo.\n\nThree\n") == [6, 12]
    assert cutter.feed("Other\n\ntext\n") == [7]


# --- laying it out ---------------------------------------------------------------------------


def _document(markdown: str) -> QTextDocument:
    document = QTextDocument()
    document.setDocumentMargin(0)
    document.setHtml(markdown_to_html(markdown))
    document.setTextWidth(600)
    return document


def _pixels(draw, height: float) -> QImage:
    image = QImage(600, int(height) + 1, QImage.Format.Format_ARGB32)
    image.fill(QColor("white"))
    painter = QPainter(image)
    draw(painter)
    painter.end()
    return image


@pytest.mark.parametrize("cut_at", [len(ANSWER), len(ANSWER) - 5, ANSWER.index("# A"), ANSWER.index("|")])
def test_block_by_block_paints_the_same_pixels_as_one_document(qapp, cut_at: int) -> None:
    text = ANSWER[:cut_at]
    whole = _document(text)
    body = GrowingAnswer(_document).layout(text)
    assert len(body.documents) > 1 or cut_at < len(ANSWER) // 2
    assert body.height == whole.size().height()
    assert (_pixels(lambda painter: body.draw(painter, QRectF(0, 0, 600, body.height)), body.height)
            == _pixels(lambda painter: whole.drawContents(painter), whole.size().height()))


def test_a_growing_answer_lays_out_its_last_block_only(qapp) -> None:
    made: list[str] = []

    def document(markdown: str) -> QTextDocument:
        made.append(markdown)
        return _document(markdown)

    growing = GrowingAnswer(document)
    layouts = 0
    for end in range(8, len(ANSWER) + 1, 8):
        growing.layout(ANSWER[:end])
        layouts += 1
    body = growing.layout(ANSWER)
    cuts = BlockCutter().feed(ANSWER)
    # One document a frame, and one more each time a block is complete.
    assert len(made) <= layouts + 1 + len(cuts)
    assert len(body.documents) == len(cuts) + 1
    # Never the whole answer again once its first block was complete.
    assert all(len(markdown) < len(ANSWER) // 2 for markdown in made)


# --- the view ----------------------------------------------------------------------------
#
# QTest.qWait, not qtbot.wait: after a test with the `loop` fixture (qasync's stop() calls
# QCoreApplication.exit()), a new QEventLoop returns at once, and qtbot's waits with it.


def _until(predicate, what: str) -> None:
    for _ in range(1000):
        if predicate():
            return
        QTest.qWait(5)
    raise AssertionError(f"timed out waiting for {what}")


class CountingModel(MessageListModel):
    """Counts rowCount calls: laying the list out asks it twice a row."""

    asked = 0

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # Override.
        self.asked += 1
        return super().rowCount(parent)


ROWS = 300


@pytest.fixture
def view(qtbot):
    model = CountingModel()
    messages = [Message(i, 1, Role.USER if i % 2 else Role.ASSISTANT, f"Message {i}", 0.0, MessageState.COMPLETE, None)
                for i in range(1, ROWS)]
    model.reset_to([*messages, Message(ROWS, 1, Role.ASSISTANT, "", 0.0, MessageState.STREAMING, None)])
    view = MessageView()
    view.setModel(model)
    view.resize(700, 500)
    qtbot.addWidget(view)
    view.show()
    _until(view.isVisible, "the view")
    QTest.qWait(50)
    # Painting measures the rows it shows, which asks for a layout: have it now.
    view.executeDelayedItemsLayout()
    return view


def _scroll_range(view: MessageView) -> int:
    """How tall the list was when last laid out (visualRect() has a growing row's new height)."""
    return view.verticalScrollBar().maximum()


def test_a_growing_answer_redraws_its_row_without_laying_out_the_list(view) -> None:
    model = view.model()
    model.append_text(ROWS, "One line")
    view.redraw_growing()
    QTest.qWait(20)
    laid_out = _scroll_range(view)
    model.asked = 0
    for word in (" and", " a", " bit", " more"):
        model.append_text(ROWS, word)
        view.redraw_growing()
        QTest.qWait(5)
    assert model.asked < model.rowCount(), "the list was laid out again for text that did not change its height"
    assert _scroll_range(view) == laid_out


def test_a_growing_answer_waits_for_its_frame_then_grows_taller(view) -> None:
    model = view.model()
    laid_out = _scroll_range(view)
    model.append_text(ROWS, "\n\n".join(f"Paragraph {i}." for i in range(12)))
    assert _scroll_range(view) == laid_out  # not at once: at the pacer's next frame
    view.redraw_growing()
    _until(lambda: _scroll_range(view) > laid_out, "the new height")
    assert view.verticalScrollBar().value() == _scroll_range(view), "it follows the end"


def test_a_finished_answer_is_shown_at_once(view) -> None:
    model = view.model()
    laid_out = _scroll_range(view)
    finished = dataclasses.replace(model.message(model.rowCount() - 1), text="Done.\n\n" * 10, state=MessageState.COMPLETE,
                                   stats=AnswerStats(tokens=3, tokens_per_s=10.0, ttft_ms=5.0,
                                                     device="CPU"))
    model.replace(finished)
    _until(lambda: _scroll_range(view) > laid_out, "the new height")


def test_a_new_theme_repaints_the_messages_without_laying_the_list_out(view) -> None:
    model, laid_out = view.model(), view.delegate.layouts
    model.asked = 0
    view.delegate.dark = True
    view.delegate.clear()
    view.viewport().update()
    QTest.qWait(20)
    assert view.delegate.layouts > laid_out, "the messages on screen are laid out in the new colours"
    assert model.asked < model.rowCount(), "the rows keep their heights"


def test_a_frame_repaints_only_from_the_block_that_changed(view) -> None:
    model = view.model()
    last = model.index(model.rowCount() - 1)
    model.append_text(ROWS, "First paragraph.\n\nSecond paragraph.\n\nThird")
    view.redraw_growing()
    QTest.qWait(20)
    model.append_text(ROWS, " words")
    view.delegate.sizeHint(None, last)
    row = view.visualRect(last)
    changed = view.delegate.growth_rect(last, row)
    assert row.top() + 3 * view.fontMetrics().height() < changed.top() < row.bottom()
    assert changed.bottom() == row.bottom()


def test_a_long_chat_shows_older_messages_as_the_user_scrolls_up_to_them(qtbot) -> None:
    from app.ui.state.message_model import SHOWN_FIRST, SHOWN_MORE

    messages = SHOWN_FIRST + SHOWN_MORE + 50
    model = MessageListModel()
    model.reset_to([Message(i, 1, Role.USER, f"Message {i}", 0.0, MessageState.COMPLETE, None)
                    for i in range(messages)])
    view = MessageView()
    view.setModel(model)
    view.resize(700, 500)
    qtbot.addWidget(view)
    view.show()
    _until(view.isVisible, "the view")
    first = messages - SHOWN_FIRST
    assert model.rowCount() == SHOWN_FIRST and model.message(0).id == first
    assert len(model.messages()) == messages and model.row_of(first - 1) is None
    bar = view.verticalScrollBar()
    assert bar.value() == bar.maximum() > 0
    bar.setValue(0)
    assert model.rowCount() == SHOWN_FIRST + SHOWN_MORE and model.message(0).id == first - SHOWN_MORE
    top = view.indexAt(QPoint(5, 5))
    assert model.message(top.row()).id == first, "what was at the top stays there"
    bar.setValue(0)
    assert model.rowCount() == messages and model.message(0).id == 0


def test_an_answer_drawn_frame_by_frame_looks_as_if_drawn_at_once(qtbot) -> None:
    def window(text: str) -> MessageView:
        model = MessageListModel()
        model.reset_to([*(Message(i, 1, Role.USER if i % 2 else Role.ASSISTANT, f"Message {i}\n\n- a\n- b", 0.0,
                                  MessageState.COMPLETE, None) for i in range(1, 40)),
                        Message(40, 1, Role.ASSISTANT, text, 0.0, MessageState.STREAMING, None)])
        view = MessageView()
        view.setModel(model)
        view.resize(700, 500)
        qtbot.addWidget(view)
        view.show()
        _until(view.isVisible, "the view")
        QTest.qWait(20)
        return view

    def shown(view: MessageView) -> QImage:
        """What the screen shows: the backing store each frame painted into, not a new paint."""
        corner = view.viewport().mapTo(view, QPoint(0, 0))
        image = view.screen().grabWindow(view.winId()).toImage()
        return image.copy(corner.x(), corner.y(), view.viewport().width(), view.viewport().height())

    text = ANSWER + "Last words and a few more"
    streamed = window("")
    for start in range(0, len(text), 5):
        streamed.model().append_text(40, text[start:start + 5])
        streamed.redraw_growing()
        streamed.executeDelayedItemsLayout()  # a taller row lays the list out: now, not by a timer
        for _ in range(3):
            QApplication.processEvents()  # the paint events
        # Each frame repainted all that changed: the screen is what a whole repaint draws.
        image = shown(streamed)
        assert image == streamed.viewport().grab().toImage().convertToFormat(image.format()), start
    assert streamed.verticalScrollBar().value() == streamed.verticalScrollBar().maximum()
    final = shown(streamed)
    streamed.close()  # Another window opening would repaint this one whole.
    drawn = window(text)
    # Drawn at once, the list lays itself out and scrolls to its end on timers: late in a whole run, on a busy
    # machine, 20 ms was not always enough, and the picture was taken before the list was at its end.
    drawn.executeDelayedItemsLayout()
    _until(lambda: drawn.verticalScrollBar().value() == drawn.verticalScrollBar().maximum(), "the list at its end")
    for _ in range(3):
        QApplication.processEvents()
    assert final == shown(drawn)
