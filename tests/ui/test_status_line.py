"""The status line's setup progress: the percentage in the bar, the words beside it and on hover, nothing cut."""

from __future__ import annotations

from app.ui.status_line import StatusLine


def test_setup_progress_shows_a_percentage_that_fits_and_its_words_on_hover(qtbot) -> None:
    line = StatusLine()
    qtbot.addWidget(line)
    line.resize(1000, line.sizeHint().height())
    line.show()
    line.show_progress("Setting up the starter model", 420, 1000)
    assert line.progress.text() == "42%"  # the words were cut to pieces inside the bar
    assert line.progress.toolTip() == "Setting up the starter model"
    assert line.progress.width() >= line.progress.fontMetrics().horizontalAdvance(line.progress.text())
    line.show_progress("Waiting for another Kestrel", 0, 0)
    assert line.progress.text() == "" and line.progress.toolTip() == "Waiting for another Kestrel"
    line.hide_progress()
    assert not line.progress.isVisible() and not line.cancel.isVisible()
