"""Every form and dialog at 100% and 200%, both themes: no label, box or button cuts its text, no stock icon.

The scenes run in child processes (tests/helpers/clip_probe.py): a scale factor must be
set before the QApplication exists. The screen is a 1920×1080 laptop's, so 200% leaves
960×540 to lay out in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from PySide6.QtWidgets import QCheckBox, QFormLayout, QLabel, QSpinBox, QWidget

from tests.helpers.clip_probe import ELIDES, clipped
from app.ui.common.window_look import fit_shortcut_letters, shortcut_letter_extra

ROOT = Path(__file__).resolve().parents[2]
SCREEN = {"screens": [{"name": "laptop", "x": 0, "y": 0, "width": 1920, "height": 1080, "logicalDpi": 96,
                       "logicalBaseDpi": 96, "dpr": 1}]}
SCENES = 18  # settings, chat settings, edit message, about, hardware, server window, export, mcp json,
# question, first run, model manager, hugging face search, attachments (files and images), source popup, message with images,
# image viewer, documents empty, documents: each in both themes


def test_every_form_and_dialog_shows_all_of_its_text_at_100_and_200_percent(tmp_path: Path) -> None:
    config = tmp_path / "screen.json"
    config.write_text(json.dumps(SCREEN), encoding="utf-8")
    children = {}
    for scale in ("1", "2"):
        env = dict(os.environ, QT_SCALE_FACTOR=scale, QT_QPA_PLATFORM=f"offscreen:configfile={config}",
                   KESTREL_HOME=str(tmp_path / f"home {scale}"))
        children[scale] = subprocess.Popen([sys.executable, "-m", "tests.helpers.clip_probe",
                                            str(tmp_path / f"{scale}.json")], cwd=ROOT, env=env,
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    problems = []
    for scale, child in children.items():
        output, _ = child.communicate(timeout=120)
        assert child.returncode == 0, output[-3000:]
        found = json.loads((tmp_path / f"{scale}.json").read_text(encoding="utf-8"))
        assert len(found["scenes"]) == 2 * SCENES, found["scenes"]
        problems += [f"{int(scale) * 100}%: {problem}" for problem in found["problems"]]
    assert not problems, "\n".join(problems)


def test_the_probe_names_a_cut_label_and_passes_a_wrapped_or_eliding_one(qtbot) -> None:
    root = QWidget()
    qtbot.addWidget(root)
    cut = QLabel("Automatic (the best this machine has)", root)
    wrapped = QLabel("Automatic (the best this machine has)", root)
    wrapped.setWordWrap(True)
    eliding = QLabel("Automatic (the best this machine has)", root)
    eliding.setProperty(ELIDES, True)
    box = QSpinBox(root)
    box.setRange(0, 8)
    box.setSpecialValueText("automatic (the cores other programs leave free)")
    for number, widget in enumerate((cut, wrapped, eliding, box)):
        widget.setGeometry(0, 30 * number, 60, 26)
    root.resize(200, 200)
    root.show()
    found = clipped(root)
    assert len(found) == 2, found
    assert "QLabel 'Automatic (the best this machine has)'" in found[0]
    assert "QSpinBox 'automatic (the cores other programs leave free)'" in found[1]


def test_a_label_with_an_underlined_shortcut_letter_gets_the_width_it_is_drawn_in(qtbot) -> None:
    """"&Temperature" loses the kerning of "Te" to the underline: drawn wider than its size hint."""
    form_widget = QWidget()
    qtbot.addWidget(form_widget)
    form = QFormLayout(form_widget)
    label = QLabel("&Temperature", form_widget)
    field = QSpinBox(form_widget)
    label.setBuddy(field)
    form.addRow(label, field)
    think = QCheckBox("T&ools this chat may use", form_widget)
    form.addRow("", think)
    form_widget.show()
    assert shortcut_letter_extra(label) > 0  # the test fonts kern "Te"
    assert any("&Temperature" in problem for problem in clipped(form_widget))
    fit_shortcut_letters(form_widget)
    form_widget.adjustSize()
    qtbot.waitUntil(lambda: not clipped(form_widget))
