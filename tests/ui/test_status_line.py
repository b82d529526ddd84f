"""The status line: its parts agree with each other, and the setup progress (the percentage in the bar, the words
beside it and on hover, nothing cut)."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QLabel

from app.service.events import ModelState
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


# Each model state, as the window gives it, with what the status line must then say (model · device · activity).
_STATES = [
    (ModelState.INSTALLING, "Setting up the starter model…", None, []),
    (ModelState.LOADING, "Loading Qwen2.5 0.5B…", None, []),
    (ModelState.READY, "Qwen2.5 0.5B", "CPU", ["CPU"]),
    (ModelState.NONE, "No model yet.", None, ["No device"]),
    (ModelState.FAILED, "It did not load.", None, ["No device"]),
    (ModelState.UNLOADED, "Unloaded to save memory", None, ["No device"]),
]
_UNDER_WAY = {ModelState.INSTALLING, ModelState.LOADING}


@pytest.mark.parametrize("state, detail, device, device_said", _STATES, ids=[s[0].value for s in _STATES])
@pytest.mark.parametrize("activity", ["Idle", "Writing…", "Waiting for the model to load…"])
@pytest.mark.parametrize("activity_first", [False, True], ids=["state-then-activity", "activity-then-state"])
def test_the_parts_never_contradict_each_other(qtbot, state, detail, device, device_said, activity,
                                               activity_first) -> None:
    line = StatusLine()
    qtbot.addWidget(line)
    line.show()
    line.set_activity("Writing…")  # what came before is gone from the parts shown
    line.set_model(ModelState.READY, "Old model")
    line.set_device("CPU")
    if activity_first:
        line.set_activity(activity)
    line.set_model(state, detail)
    line.set_device(device)  # as MainWindow does: a device only when ready
    if not activity_first:
        line.set_activity(activity)
    said = line.parts_said()
    model_said = {ModelState.FAILED: "Model failed to load", ModelState.NONE: "No model"}.get(state, detail)
    activity_said = [] if state in _UNDER_WAY and activity == "Idle" else [activity]
    assert said == [model_said, *device_said, *activity_said]
    dots = [dot for dot in line.findChildren(QLabel, "statusDot") if not dot.isHidden()]
    assert len(dots) == len(said) - 1  # "Setting up… · ·" would be a contradiction of its own
