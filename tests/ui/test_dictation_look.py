"""The listening bar and Settings → Voice at 100% and 200%, light and dark: no text cut (the scenes run in child processes, as the
clipping check's do: a scale factor is set before the QApplication exists)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.scaled_look import problems_at_both_scales

SCENES = r'''
import json, sys
from PySide6.QtWidgets import QApplication, QVBoxLayout, QWidget
from app.core.settings import Settings
from app.ui.chat.composer import Composer
from app.ui.common.theme import apply_theme, part_styles
from app.ui.settings.dialogs import SettingsDialog
from app.ui.voice import dictation_words as said
from app.voice.device_words import device_words
from app.voice.devices import DeviceProblem, DeviceUnavailable
from tests.helpers.clip_probe import clipped

app = QApplication([])
problems, looked = [], []
for theme in ("light", "dark"):
    dark = apply_theme(app, theme)
    for state in ("listening", "problem"):
        host = QWidget()
        composer = Composer(host)
        QVBoxLayout(host).addWidget(composer)
        composer.frame.setStyleSheet(part_styles(dark)["composerFrame"])
        bar = composer.dictation_bar
        if state == "listening":
            composer.set_dictating(True, said.LISTENING_TIP)
            bar.show_working(said.FINISHING, microphone_open=True)
            bar.show_words("Ever tried. Ever failed. No matter. Try again. Fail again. Fail better. " * 3)
            bar.meter.set_level(-20)
        else:
            bar.show_problem(device_words(DeviceUnavailable(DeviceProblem.DEVICE_LOST)))
        host.setFixedWidth(480)  # as narrow as the chat pane gets: the bar wraps, never widens the window
        host.resize(480, max(host.sizeHint().height(), host.heightForWidth(480)))  # a window gets no height for its width by itself
        host.show()
        app.processEvents()
        looked.append(f"{theme} {state}")
        problems += [f"{theme} {state}: {found}" for found in clipped(host)]
        host.close()
    dialog = SettingsDialog(Settings(), None)
    dialog.show_page("voice")
    dialog.show()
    app.processEvents()
    looked.append(f"{theme} voice settings")
    problems += [f"{theme} voice settings: {found}" for found in clipped(dialog)]
    dialog.close()
print(json.dumps({"looked": looked, "problems": problems}))
'''


def test_the_listening_bar_and_the_voice_page_show_all_their_text(tmp_path: Path) -> None:
    problems = problems_at_both_scales(tmp_path, SCENES, 6)
    assert not problems, "\n".join(problems)
