"""Voice mode in the window: its button, shortcut, Esc and the bar's close button start and end it through the service; a real
conversation through a private PulseAudio (the recording spoken into its microphone, the answer said on its speaker) shows each
state in the listening bar; words that could not be sent land in the message box; a missing microphone is said; Settings → Voice."""

from __future__ import annotations

import dataclasses
import subprocess
import wave
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.core.conversation import Role
from app.core.paths import data_paths
from app.core.settings import Settings
from app.core.voice_settings import VoiceSettings
from app.service.voice.dictation_events import DictationState
from app.service.voice.read_aloud_events import ReadAloudState
from app.service.voice.voice_mode_events import VoiceModeState
from app.ui.main_window import MainWindow
from app.ui.settings.dialogs import SettingsDialog
from app.ui.settings.voice_settings_page import INTERRUPT_TIP
from app.ui.voice import dictation_words, voice_mode_words as said
from app.voice.device_words import device_words
from app.voice.devices import DeviceProblem, DeviceUnavailable
from tests.helpers.pulse import ALSA_PULSE_DEVICE, SINK, PulseServer
from tests.helpers.scripted_answers import Script
from tests.helpers.scripted_engine import ScriptedEngine
from tests.helpers.speech import BECKETT, built_speech_folder, link_speech_home, words
from tests.ui.conftest import run, until
from tests.helpers.scaled_look import problems_at_both_scales

CTRL_SHIFT = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
# Where the recording's first two phrases are, in seconds.
EVER_TRIED, EVER_FAILED = (0.0, 1.6), (1.6, 2.9)
# A long answer, word by word: it is still being said when the test speaks over it.
LONG_ANSWER = tuple(f"{' ' if number else ''}{word}" for number, word in enumerate(
    ("Kestrels hover over open fields, watching the grass below for a mouse to move. " * 12).split()))


@pytest.fixture(scope="module")
def built_speech(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_speech_folder(tmp_path_factory.mktemp("speech"))


@pytest.fixture
def voice_home(built_speech: Path) -> Path:
    """This test's Kestrel home with the speech model and the voice in place (linked, not copied)."""
    return link_speech_home(built_speech)


def voice_window(make_window, loop, voice: VoiceSettings, engine: ScriptedEngine | None = None) -> MainWindow:
    window = make_window(engine=engine or ScriptedEngine())
    settings = window.doors.settings.settings
    run(loop, window.doors.settings.update_settings(dataclasses.replace(settings, voice=voice)))
    return window


def microphone_open(window: MainWindow) -> bool:
    return window.doors.voice.state is DictationState.LISTENING


def phrase(start_s: float, end_s: float) -> Path:
    """One phrase of the recording, then a second of silence, as a WAV of its own (voice mode sends each
    utterance as a message: the whole recording would be six)."""
    with wave.open(str(BECKETT)) as reader:
        params, rate = reader.getparams(), reader.getframerate()
        reader.setpos(round(start_s * rate))
        frames = reader.readframes(round((end_s - start_s) * rate))
    out = data_paths().ensure().data / f"phrase {start_s}.wav"
    with wave.open(str(out), "wb") as writer:
        writer.setparams(params)
        writer.writeframes(frames + bytes(2 * rate))
    return out


def speak(pulse: PulseServer, said_now: tuple[float, float] = EVER_TRIED) -> subprocess.Popen[bytes]:
    """The person says a phrase into the microphone (the speaker sink, whose monitor the microphone is)."""
    return subprocess.Popen(["paplay", f"--server={pulse.address}", f"--device={SINK}", str(phrase(*said_now))])


def asked(window: MainWindow) -> list[str]:
    return [message.text for message in window.doors.chat.messages if message.role is Role.USER]


class BarLog:
    """What the listening bar showed after each voice-mode and dictation event: (voice mode's state, the line,
    the red dot, the words). Heard after the window's own listeners, which were subscribed first."""

    def __init__(self, window: MainWindow) -> None:
        self.seen: list[tuple[VoiceModeState, str, bool, str]] = []
        self._bar, self._door = window.composer.dictation_bar, window.doors.voice_mode
        self.stops = [self._door.subscribe(self._note), window.doors.voice.subscribe(self._note)]

    def _note(self, _event: object) -> None:
        bar = self._bar
        self.seen.append((self._door.state, bar.status.text(), not bar.dot.isHidden(), bar.words.text()))

    def lines(self, state: VoiceModeState) -> set[tuple[str, bool]]:
        return {(line, dot) for seen, line, dot, _words in self.seen if seen is state}

    def words(self) -> list[str]:
        return [words for _state, _line, _dot, words in self.seen if words]


@pytest.fixture
def bar_log(make_window) -> Iterator[Callable[[MainWindow], BarLog]]:
    """BarLogs for windows, which stop listening before the windows go (the last events come at shutdown)."""
    logs: list[BarLog] = []

    def log(window: MainWindow) -> BarLog:
        logs.append(BarLog(window))
        return logs[-1]

    yield log
    for made in logs:
        for stop in made.stops:
            stop()


def test_the_button_shortcut_escape_and_the_bar_start_and_end_voice_mode_and_hidden_it_waits(
        pulse: PulseServer, loop, make_window, voice_home: Path) -> None:
    window = voice_window(make_window, loop, VoiceSettings(microphone=ALSA_PULSE_DEVICE))
    composer, bar, door = window.composer, window.composer.dictation_bar, window.doors.voice_mode
    button = composer.voice_mode_button
    assert not button.isChecked() and button.toolTip() == said.READY_TIP and button.accessibleName() == "Voice mode"
    assert "Ctrl+Shift+T" in said.READY_TIP and composer.mic_button.isEnabled()
    chat_menu = next(action.menu() for action in window.menuBar().actions() if action.text() == "&Chat")
    texts = [action.text() for action in chat_menu.actions()]
    assert texts[texts.index("Read &aloud / stop reading") + 1] == "&Voice mode"  # beside read-aloud
    assert window.voice_mode.action.shortcut().toString() == "Ctrl+Shift+T"
    composer.mic_button.setFocus()  # Tab goes from the microphone to voice mode's button
    QTest.keyClick(composer.mic_button, Qt.Key.Key_Tab)
    assert button.hasFocus()
    composer.edit.setPlainText("A draft of mine")
    button.click()
    # The press returned before the microphone opened: that happens on a thread.
    assert door.state is VoiceModeState.LISTENING and button.isChecked() and button.toolTip() == said.ON_TIP
    assert button.accessibleName() == "End voice mode" and window.voice_mode.action.isChecked()
    assert not composer.mic_button.isEnabled() and composer.mic_button.toolTip() == said.MIC_TIP
    assert bar.isVisible() and not bar.dot.isVisible() and bar.close_button.isVisible()
    assert bar.close_button.accessibleName() == "End voice mode"
    run(loop, until(lambda: microphone_open(window), 30, "the microphone to open"))
    assert bar.status.text() == said.LISTENING and bar.dot.isVisible() and bar.meter.isVisible()
    assert len(pulse.source_outputs()) == 1
    # The shortcut ends it: the microphone closes, nothing goes in the box.
    QTest.keyClick(window, Qt.Key.Key_T, CTRL_SHIFT)
    assert door.state is VoiceModeState.OFF and not button.isChecked() and not bar.isVisible()
    assert composer.mic_button.isEnabled() and not window.voice_mode.action.isChecked()
    run(loop, until(lambda: window.doors.voice.state is DictationState.IDLE and pulse.source_outputs() == [], 30,
                    "the microphone to close"))
    assert composer.edit.toPlainText() == "A draft of mine" and not bar.isVisible()
    # The shortcut starts it; Esc in the message box ends it (the composer's own Esc would stop an answer).
    QTest.keyClick(window, Qt.Key.Key_T, CTRL_SHIFT)
    assert door.state is VoiceModeState.LISTENING
    run(loop, until(lambda: microphone_open(window), 30, "the microphone to open"))
    composer.edit.setFocus()
    QTest.keyClick(composer.edit, Qt.Key.Key_Escape)
    assert door.state is VoiceModeState.OFF and not bar.isVisible()
    run(loop, until(lambda: window.doors.voice.state is DictationState.IDLE, 30, "the microphone to close"))
    # The bar's close button ends it too.
    button.click()
    run(loop, until(lambda: microphone_open(window), 30, "the microphone to open"))
    bar.close_button.click()
    assert door.state is VoiceModeState.OFF and not button.isChecked() and not bar.isVisible()
    run(loop, until(lambda: window.doors.voice.state is DictationState.IDLE, 30, "the microphone to close"))
    # Hidden, it waits with the microphone closed; shown again, it listens.
    button.click()
    run(loop, until(lambda: microphone_open(window), 30, "the microphone to open"))
    window.hide()
    assert door.state is VoiceModeState.WAITING and bar.status.text() == said.WAITING and bar.dot.isHidden()
    run(loop, until(lambda: pulse.source_outputs() == [], 30, "the microphone to close"))
    window.show()
    assert door.state is VoiceModeState.LISTENING
    run(loop, until(lambda: microphone_open(window), 30, "the microphone to open again"))
    assert bar.status.text() == said.LISTENING and bar.dot.isVisible() and len(pulse.source_outputs()) == 1
    assert composer.edit.toPlainText() == "A draft of mine"


def test_spoken_words_are_sent_and_answered_aloud_and_the_message_box_is_left_alone(
        pulse: PulseServer, loop, make_window, bar_log, voice_home: Path) -> None:
    """Interrupting off: the microphone is closed while Kestrel thinks and speaks (a loudspeaker the microphone
    hears), and Esc is how to stop it."""
    engine = ScriptedEngine()
    engine.scripts.append(Script(text=LONG_ANSWER, endless=False, token_s=0.02))
    window = voice_window(make_window, loop, VoiceSettings(microphone=ALSA_PULSE_DEVICE, speaker=ALSA_PULSE_DEVICE,
                                                           interrupt_by_speaking=False), engine)
    composer, bar, door, reading = (window.composer, window.composer.dictation_bar, window.doors.voice_mode,
                                    window.doors.read_aloud)
    composer.edit.setPlainText("A draft of mine")
    log = bar_log(window)
    composer.voice_mode_button.click()
    run(loop, until(lambda: microphone_open(window), 30, "the microphone to open"))
    player = speak(pulse)
    try:
        run(loop, until(lambda: door.state is VoiceModeState.SPEAKING, 120, "the answer said"))
    finally:
        player.kill()
        player.wait(10)
    assert len(asked(window)) == 1 and words(asked(window)[0]) == ["ever", "tried"], asked(window)
    assert composer.edit.toPlainText() == "A draft of mine"  # the words went to the chat, not the box
    assert (said.HEARING, True) in log.lines(VoiceModeState.LISTENING)
    assert (said.SENDING, False) in log.lines(VoiceModeState.LISTENING)
    assert any(words(shown) == ["ever", "tried"] for shown in log.words())  # shown while heard
    assert log.lines(VoiceModeState.THINKING) == {(said.THINKING, False)}  # the microphone closed meanwhile
    assert bar.status.text() == said.SPEAKING_ESC and bar.dot.isHidden() and bar.words.isHidden()
    assert reading.state is ReadAloudState.SPEAKING and reading.message_id == window.doors.chat.messages[-1].id
    window.messages.setFocus()  # where read-aloud's own Esc lives: the two do not meet
    QTest.keyClick(window.messages, Qt.Key.Key_Escape)
    assert door.state is VoiceModeState.OFF and reading.state is ReadAloudState.IDLE and not bar.isVisible()
    assert window.doors.voice.state is DictationState.IDLE and composer.edit.toPlainText() == "A draft of mine"


def test_speaking_over_kestrel_stops_its_voice_and_is_the_next_message(
        pulse: PulseServer, loop, make_window, bar_log, voice_home: Path) -> None:
    """Interrupting on, with headphones (the voice on a second sink the microphone does not hear): the microphone
    stays open while Kestrel thinks and speaks, the dot says so, and the person's speech silences it."""
    pulse.pactl("load-module", "module-null-sink", "sink_name=kestrel_headphones")
    pulse.pactl("set-default-sink", "kestrel_headphones")
    engine = ScriptedEngine()
    engine.scripts.append(Script(text=LONG_ANSWER, endless=False, token_s=0.02))
    engine.scripts.append(Script(text=("Fail", " better", "."), endless=False))
    window = voice_window(make_window, loop, VoiceSettings(microphone=ALSA_PULSE_DEVICE, speaker=ALSA_PULSE_DEVICE),
                          engine)
    bar, door, reading = window.composer.dictation_bar, window.doors.voice_mode, window.doors.read_aloud
    log = bar_log(window)
    window.composer.voice_mode_button.click()
    run(loop, until(lambda: microphone_open(window), 30, "the microphone to open"))
    player = speak(pulse)
    try:
        run(loop, until(lambda: door.state is VoiceModeState.SPEAKING and microphone_open(window), 120,
                        "the answer said with the microphone open"))
    finally:
        player.kill()
        player.wait(10)
    assert (said.THINKING, True) in log.lines(VoiceModeState.THINKING)  # the microphone open while it thinks
    assert bar.status.text() == said.SPEAKING and bar.dot.isVisible() and bar.meter.isVisible()
    first_answer = window.doors.chat.messages[-1].id
    assert reading.message_id == first_answer
    player = speak(pulse, EVER_FAILED)  # over Kestrel's voice
    try:
        run(loop, until(lambda: reading.state is ReadAloudState.IDLE, 60, "the voice to stop"))
        assert door.state is VoiceModeState.LISTENING and bar.status.text() == said.HEARING
        run(loop, until(lambda: len(asked(window)) == 2, 90, "the words heard sent"))
    finally:
        player.kill()
        player.wait(10)
    assert words(asked(window)[0]) == ["ever", "tried"] and "fail" in asked(window)[1].lower(), asked(window)
    run(loop, until(lambda: reading.message_id not in (None, first_answer) or door.state is VoiceModeState.LISTENING,
                    90, "the second answer said"))
    assert door.state is not VoiceModeState.OFF
    QTest.keyClick(window, Qt.Key.Key_Escape)
    assert door.state is VoiceModeState.OFF and reading.state is ReadAloudState.IDLE


def test_words_the_chat_cannot_take_go_in_the_message_box(pulse: PulseServer, loop, make_window,
                                                          voice_home: Path) -> None:
    window = voice_window(make_window, loop, VoiceSettings(microphone=ALSA_PULSE_DEVICE),
                          ScriptedEngine(token_s=1.0))  # answers of 24 tokens: 24 s
    composer, bar, door = window.composer, window.composer.dictation_bar, window.doors.voice_mode
    composer.voice_mode_button.click()
    run(loop, until(lambda: microphone_open(window), 30, "the microphone to open"))
    composer.edit.setPlainText("Tell me about kestrels.")  # typed and sent: its answer is still written...
    QTest.keyClick(composer.edit, Qt.Key.Key_Return)
    run(loop, until(lambda: window.doors.chat.open_chat_busy and composer.edit.toPlainText() == "", 30, "the answer"))
    player = speak(pulse)  # ...when the person speaks
    try:
        run(loop, until(lambda: door.state is VoiceModeState.OFF, 120, "voice mode to give up"))
    finally:
        player.kill()
        player.wait(10)
    assert words(composer.edit.toPlainText()) == ["ever", "tried"], composer.edit.toPlainText()
    assert bar.isVisible() and bar.status.text() == said.NOT_SENT and bar.close_button.isVisible()
    assert bar.close_button.accessibleName() == "Close" and bar.dot.isHidden()
    assert not composer.voice_mode_button.isChecked() and composer.mic_button.isEnabled()
    assert asked(window) == ["Tell me about kestrels."]
    bar.close_button.click()
    assert not bar.isVisible() and words(composer.edit.toPlainText()) == ["ever", "tried"]


def test_no_microphone_ends_voice_mode_in_words(pulse_without_devices: PulseServer, loop, make_window,
                                                voice_home: Path) -> None:
    window = make_window(model=None)  # the default microphone: there is none
    composer, bar, door = window.composer, window.composer.dictation_bar, window.doors.voice_mode
    QTest.keyClick(window, Qt.Key.Key_T, CTRL_SHIFT)
    run(loop, until(lambda: door.state is VoiceModeState.OFF, 30, "voice mode to give up"))
    assert bar.isVisible() and bar.status.text() == (
        "Voice mode ended. " + device_words(DeviceUnavailable(DeviceProblem.NO_MICROPHONE)))
    assert bar.close_button.isVisible() and not bar.dot.isVisible() and not composer.voice_mode_button.isChecked()
    assert composer.mic_button.isEnabled() and composer.edit.toPlainText() == ""
    composer.voice_mode_button.click()  # a new try replaces the old words at once
    assert bar.status.text() == dictation_words.OPENING and door.state is VoiceModeState.LISTENING
    assert bar.close_button.accessibleName() == "End voice mode"
    run(loop, until(lambda: door.state is VoiceModeState.OFF, 30, "voice mode to give up again"))
    bar.close_button.click()
    assert not bar.isVisible()


def test_the_voice_page_keeps_the_interrupt_setting(loop, make_window) -> None:
    window = make_window(model=None)
    off = Settings(voice=VoiceSettings(interrupt_by_speaking=False))
    dialog = SettingsDialog(off, window, adapter=window.adapter)
    box = dialog.voice.interrupt
    assert not box.isChecked() and box.text() == "&Stop talking when I start to speak (voice mode)"
    assert "headphones" in box.toolTip() and box.toolTip() == INTERRUPT_TIP
    assert dialog.value().voice == VoiceSettings(interrupt_by_speaking=False)
    box.setChecked(True)
    assert dialog.value().voice == VoiceSettings(interrupt_by_speaking=True)
    dialog.deleteLater()
    dialog = SettingsDialog(Settings(), window, adapter=window.adapter)
    assert dialog.voice.interrupt.isChecked()  # on unless turned off
    dialog.deleteLater()


LOOK = r'''
import json, sys
from PySide6.QtWidgets import QApplication, QVBoxLayout, QWidget
from app.service.voice.dictation_events import DictationState
from app.service.voice.voice_mode_events import VoiceModeEnd, VoiceModeEnded, VoiceModeState
from app.ui.chat.composer import Composer
from app.ui.common.theme import apply_theme, part_styles
from app.ui.voice import dictation_words, voice_mode_words as said
from tests.helpers.clip_probe import clipped

app = QApplication([])
problems, looked = [], []
states = {"listening": (VoiceModeState.LISTENING, DictationState.LISTENING, True),
          "thinking": (VoiceModeState.THINKING, DictationState.LISTENING, False),
          "speaking": (VoiceModeState.SPEAKING, DictationState.LISTENING, False),
          "waiting": (VoiceModeState.WAITING, DictationState.IDLE, False)}
for theme in ("light", "dark"):
    dark = apply_theme(app, theme)
    for name in (*states, "ended"):
        host = QWidget()
        composer = Composer(host)
        QVBoxLayout(host).addWidget(composer)
        composer.frame.setStyleSheet(part_styles(dark)["composerFrame"])
        bar = composer.dictation_bar
        if name == "ended":
            bar.show_problem(said.ended_words(VoiceModeEnded(VoiceModeEnd.NOT_SENT, detail="Ever tried.")))
        else:
            state, dictation, hearing = states[name]
            composer.set_voice_mode(True, said.ON_TIP)
            bar.show_voice_mode(said.status_words(state, dictation, hearing=hearing, heard=hearing, interrupt=True),
                                microphone_open=dictation is DictationState.LISTENING, close_tip=said.ON_TIP)
            bar.show_words("Ever tried. Ever failed. No matter. Try again. Fail again. Fail better." if hearing else "")
            bar.meter.set_level(-20)
        host.setFixedWidth(480)  # as narrow as the chat pane gets
        host.resize(480, max(host.sizeHint().height(), host.heightForWidth(480)))
        host.show()
        app.processEvents()
        looked.append(f"{theme} {name}")
        problems += [f"{theme} {name}: {found}" for found in clipped(host)]
        if composer.edit.width() < 120:
            problems.append(f"{theme} {name}: the message box is {composer.edit.width()} px wide")
        if not bar.close_button.isVisible():
            problems.append(f"{theme} {name}: no close button")
        host.close()
print(json.dumps({"looked": looked, "problems": problems}))
'''


def test_the_voice_mode_bar_shows_all_its_text_at_100_and_200_percent(tmp_path: Path) -> None:
    problems = problems_at_both_scales(tmp_path, LOOK, 10)
    assert not problems, "\n".join(problems)
