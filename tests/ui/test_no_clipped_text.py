"""Every form and dialog at 100% and 200%, both themes: no label, box, button, table cell or window title cuts its text, no stock icon.

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

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QCheckBox, QDialog, QFormLayout, QHBoxLayout, QLabel, QSpinBox, QTableWidget,
                               QTableWidgetItem, QToolButton, QWidget)

from app.ui.common.text_room import FULL_TEXT, elides_on_purpose, fit_title
from tests.helpers.clip_probe import ELIDES, clipped, cut_cells, cut_title, elided_with_room
from tests.helpers.scaled_look import SCREEN
from app.ui.common.window_look import fit_shortcut_letters, shortcut_letter_extra

ROOT = Path(__file__).resolve().parents[2]
# Found by the table-cell and title checks (issue 37) in forms another change owns; each is
# named here until its fix lands, and the test fails once one is fixed and still listed.
PENDING: tuple[str, ...] = ()
SCENES = 35  # settings, chat settings, edit message, about, hardware, server window, export, mcp json,
# question, first run, model manager, hugging face search, attachments (files and images), source popup, message with images,
# image viewer, documents empty, documents, collection name, chat header, add a server, model manager with servers,
# server model settings (said, and nothing said),
# memory empty, memory, memory text, used memories, memory proposal, remember, temporary chat, project dialog, projects panel, add
# another kestrel, kestrel link sharing: each in both themes


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
    still_pending = {known for known in PENDING if any(known in problem for problem in problems)}
    assert still_pending == set(PENDING), f"fixed, take off PENDING: {set(PENDING) - still_pending}"
    problems = [problem for problem in problems if not any(known in problem for known in PENDING)]
    assert not problems, "\n".join(problems)


def test_windows_own_voices_show_whole_in_models_and_settings_at_100_and_200_percent(tmp_path: Path) -> None:
    """Models → Speech and Settings → Voice as on Windows (KESTREL_CLIP_WINDOWS: PyWinRT's stand-in lists its
    voices), where longer names ("Microsoft Irina - Russian (Russia)") and their rows join the lists."""
    config = tmp_path / "screen.json"
    config.write_text(json.dumps(SCREEN), encoding="utf-8")
    problems = []
    for scale in ("1", "2"):
        env = dict(os.environ, QT_SCALE_FACTOR=scale, QT_QPA_PLATFORM=f"offscreen:configfile={config}",
                   KESTREL_CLIP_WINDOWS="1", KESTREL_CLIP_SCENES="model manager,settings")
        done = subprocess.run([sys.executable, "-m", "tests.helpers.clip_probe", str(tmp_path / f"{scale}.json")],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        found = json.loads((tmp_path / f"{scale}.json").read_text(encoding="utf-8"))
        assert len(found["scenes"]) == 4, found["scenes"]
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


def test_the_probe_names_a_cut_cell_and_passes_a_declared_eliding_column_and_a_wrapped_one(qtbot) -> None:
    """The kinds issue 37 met: About's licence cell cut, the Documents reason elided in the middle."""
    table = QTableWidget(2, 3)
    qtbot.addWidget(table)
    reason = "password-protected PDF: save a copy without the password (Print → Save as PDF) to add it"
    for column, text in enumerate(("/a/long/folder/of/reports/2024/salaries.pdf", reason, "MIT")):
        table.setItem(0, column, QTableWidgetItem(text))
    table.setItem(1, 2, QTableWidgetItem("Copyright (C)\nMicrosoft\nCorporation."))
    table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
    table.setWordWrap(False)
    for column in range(3):
        table.setColumnWidth(column, 120)
    table.resize(420, 200)
    table.show()
    found = cut_cells(table)
    assert [problem.split(" cell ")[1].split(")")[0] for problem in found] == ["(0, 0", "(0, 1", "(1, 2"], found
    assert "px tall" in found[2]  # three lines in a one-line row
    elides_on_purpose(table, 0)  # a path shown whole in its tooltip
    assert len(cut_cells(table)) == 2
    table.setWordWrap(True)
    table.setColumnWidth(1, 200)  # "password-protected" must fit on a line of its own
    table.resizeRowsToContents()
    assert len(cut_cells(table)) == 0


def test_the_probe_names_a_window_too_narrow_for_its_title_until_it_is_fitted(qtbot) -> None:
    dialog = QDialog()
    qtbot.addWidget(dialog)
    dialog.setWindowTitle("Name the collection")
    dialog.resize(223, 100)
    assert "'Name the collection'" in cut_title(dialog)[0]
    fit_title(dialog)
    dialog.resize(223, 100)
    assert cut_title(dialog) == []


def test_the_probe_names_a_name_elided_by_hand_while_its_window_has_room(qtbot) -> None:
    root = QWidget()
    qtbot.addWidget(root)
    button = QToolButton(root)
    name = "Qwen2.5 Coder 0.5B Instruct (Q4_K_M, starter)"
    button.setText(button.fontMetrics().elidedText(name, Qt.TextElideMode.ElideRight, 150))
    button.setProperty(FULL_TEXT, name)
    layout = QHBoxLayout(root)
    layout.addWidget(button)
    layout.addStretch(1)
    root.resize(1200, 40)
    root.show()
    assert "elides 'Qwen2.5 Coder 0.5B Instruct (Q4_K_M, starter)'" in elided_with_room(root)[0]
    root.resize(button.sizeHint().width() + 30, 40)  # no room left: eliding is right
    assert elided_with_room(root) == []
