"""Quick ask's screenshot: a grab given to the window (offscreen, Qt's own is blank), the region picked over it, the
crop's arithmetic, the words for a refused grab, and the words when the model cannot see images."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPixmap, QScreen
from PySide6.QtTest import QTest

from app.engine import protocol as p
from app.service.doors.quick_ask import QuickAskDoor
from app.ui.chat.attachment_chips import ChipState
from app.ui.quick_ask.quick_chips import ScreenshotChip
from app.ui.quick_ask.quick_window import QuickAskWindow
from app.ui.quick_ask.screen_grab import GRAB_REFUSED, crop_rect, region_between
from tests.helpers.scripted_answers import written
from tests.helpers.scripted_engine import ScriptedEngine
from tests.service.conftest import give_sight
from tests.ui.conftest import run, service_of, until


def test_a_dragged_region_is_cut_from_the_grab_in_its_own_pixels() -> None:
    shown, grabbed = QSize(400, 300), QSize(800, 600)  # a 200% screen: two grab pixels a logical one
    assert crop_rect(region_between(QPoint(10, 20), QPoint(109, 69)), shown, grabbed) == QRect(20, 40, 200, 100)
    # Dragged up and to the left: the same region.
    assert region_between(QPoint(109, 69), QPoint(10, 20)) == QRect(10, 20, 100, 50)
    assert region_between(QPoint(10, 69), QPoint(109, 20)) == QRect(10, 20, 100, 50)
    # Past the screen's edge: kept inside the grab.
    assert crop_rect(QRect(QPoint(350, 250), QPoint(499, 399)), shown, grabbed) == QRect(700, 500, 100, 100)
    # A click, or a drag of a few pixels: the whole screen.
    assert crop_rect(QRect(QPoint(50, 50), QPoint(53, 90)), shown, grabbed) == QRect(0, 0, 800, 600)
    assert crop_rect(QRect(), shown, grabbed) == QRect(0, 0, 800, 600)
    assert crop_rect(QRect(0, 0, 100, 100), shown, QSize(400, 300)) == QRect(0, 0, 100, 100)  # 100%


def painted_screen(screen: QScreen) -> QPixmap:
    """A stand-in grab: the screen's size, a red square on grey where a drag will go."""
    grab = QPixmap(screen.geometry().size())
    grab.fill(QColor("#808080"))
    painter = QPainter(grab)
    painter.fillRect(QRect(100, 100, 200, 150), QColor("#ff0000"))
    painter.end()
    return grab


def make_quick(make_window, qtbot, grab, *answers: str):
    engine = ScriptedEngine()
    engine.scripts.extend(written(answer) for answer in answers)
    window = make_window(engine=engine)
    quick = QuickAskWindow(QuickAskDoor(service_of(window)), grab=grab)
    qtbot.addWidget(quick)
    return window, quick, engine


def screenshot_chip(loop, quick: QuickAskWindow) -> ScreenshotChip:
    run(loop, until(lambda: any(isinstance(c, ScreenshotChip) and c.state != ChipState.READING
                                for c in quick._chips()), what="the screenshot checked"))
    [chip] = [c for c in quick._chips() if isinstance(c, ScreenshotChip)]
    return chip


def drag(widget, start: QPoint, end: QPoint) -> None:
    QTest.mousePress(widget, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, start)
    QTest.mouseMove(widget, end)
    QTest.mouseRelease(widget, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, end)


def test_a_region_dragged_over_the_grab_goes_with_the_question_to_a_model_that_sees(
        loop, make_window, qtbot) -> None:
    window, quick, engine = make_quick(make_window, qtbot, painted_screen, "A red square.")
    give_sight(service_of(window))
    quick.summon()
    quick.screenshot.click()
    qtbot.waitUntil(lambda: quick.region_picker is not None and quick.region_picker.isVisible())
    assert not quick.isVisible(), "hidden: not in its own picture"
    drag(quick.region_picker, QPoint(100, 100), QPoint(299, 249))
    chip = screenshot_chip(loop, quick)
    assert quick.isVisible() and quick.region_picker is None
    assert chip.state == ChipState.READY and chip.image is not None
    assert (chip.image.width, chip.image.height) == (200, 150), "the dragged region, not the screen"
    assert not chip.thumb.isHidden(), "shown as a thumbnail before it is sent"
    QTest.keyClicks(quick.question, "What is this?")
    QTest.keyClick(quick.question, Qt.Key.Key_Return)
    run(loop, until(lambda: quick.answers.last_answer() == "A red square." and not quick._door.busy))
    [sent] = [r for r in engine.requests if isinstance(r, p.Generate)]
    assert len(sent.messages[-1].images) == 1 and quick._chips() == []


def test_a_click_over_the_grab_takes_the_whole_screen(loop, make_window, qtbot) -> None:
    window, quick, _engine = make_quick(make_window, qtbot, painted_screen)
    give_sight(service_of(window))
    quick.summon()
    quick.take_screenshot()
    qtbot.waitUntil(lambda: quick.region_picker is not None)
    size = quick.region_picker.geometry().size()
    QTest.mouseClick(quick.region_picker, Qt.MouseButton.LeftButton, pos=QPoint(40, 40))
    chip = screenshot_chip(loop, quick)
    assert chip.image is not None
    longest = max(size.width(), size.height())
    scale = min(1.0, 1536 / longest)  # the image check bounds a side at 1536 px
    assert (chip.image.width, chip.image.height) == (round(size.width() * scale), round(size.height() * scale))


def test_esc_over_the_grab_takes_nothing_and_the_window_comes_back(loop, make_window, qtbot) -> None:
    # People press Esc to cancel: a whole screen sent by mistake could show what they did not mean to share.
    window, quick, _engine = make_quick(make_window, qtbot, painted_screen)
    give_sight(service_of(window))
    quick.summon()
    quick.take_screenshot()
    qtbot.waitUntil(lambda: quick.region_picker is not None)
    QTest.keyClick(quick.region_picker, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: quick.isVisible() and quick.region_picker is None)
    assert quick._chips() == []


def test_a_model_that_cannot_see_gets_no_screenshot_and_the_chip_says_why(loop, make_window, qtbot) -> None:
    _window, quick, engine = make_quick(make_window, qtbot, painted_screen, "Text only.")
    quick.summon()
    quick.take_screenshot()
    qtbot.waitUntil(lambda: quick.region_picker is not None)
    quick.region_picker.pick(QRect(0, 0, 50, 50))
    chip = screenshot_chip(loop, quick)
    assert chip.state == ChipState.REFUSED and chip.image is None
    assert "cannot see images" in chip.label.text() and "not sent" in chip.label.text()
    QTest.keyClicks(quick.question, "Still answer")
    QTest.keyClick(quick.question, Qt.Key.Key_Return)
    run(loop, until(lambda: quick.answers.last_answer() == "Text only." and not quick._door.busy))
    [sent] = [r for r in engine.requests if isinstance(r, p.Generate)]
    assert sent.messages[-1].images == ()


def test_a_refused_grab_is_said_in_words_and_the_window_stays_usable(loop, make_window, qtbot) -> None:
    _window, quick, _engine = make_quick(make_window, qtbot, lambda _screen: QPixmap(), "Fine without.")
    quick.summon()
    quick.take_screenshot()
    qtbot.waitUntil(lambda: quick.isVisible() and quick.status.text() == GRAB_REFUSED)
    assert quick.region_picker is None and quick._chips() == [] and quick.status.isVisible()
    QTest.keyClicks(quick.question, "Hello")
    QTest.keyClick(quick.question, Qt.Key.Key_Return)
    run(loop, until(lambda: quick.answers.last_answer() == "Fine without." and not quick._door.busy))
