"""The composer's microphone in the window: a press opens a real microphone (a private PulseAudio's), the words land in the box, a second press stops."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.core.conversation import Role
from app.core.paths import data_paths
from app.core.settings import Settings, SettingsFile
from app.core.voice_settings import DETECT_LANGUAGE, VoiceSettings
from app.service.voice import dictation_service
from app.service.voice.dictation_events import DictationState
from app.ui.main_window import MainWindow
from app.ui.settings.dialogs import SettingsDialog
from app.ui.settings.voice_settings_page import DEFAULT_MICROPHONE
from app.ui.voice import dictation_words as said
from app.voice.device_words import device_words
from app.voice.devices import DeviceProblem, DeviceUnavailable
from app.voice.speech_models import WHISPER_TINY_EN, ensure_speech_model
from tests.helpers.clip_probe import clipped
from tests.helpers.scripted_engine import ScriptedEngine
from tests.helpers.pulse import ALSA_PULSE_DEVICE, PulseServer
from tests.helpers.speech import BECKETT, BECKETT_SAID, similarity, voice_or_skip
from tests.ui.conftest import run, until


@pytest.fixture(scope="module")
def built_speech_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Whisper tiny.en put together once for this module (by the app's own code)."""
    voice_or_skip()
    folder = tmp_path_factory.mktemp("speech")
    return ensure_speech_model(WHISPER_TINY_EN, folder)


@pytest.fixture
def voice_home(built_speech_model: Path) -> Path:
    """This test's Kestrel home with the speech model in place (linked, not copied: 75 MB per test) and
    dictation on the private server's microphone, stopped by a press rather than the end of speech."""
    speech = data_paths().ensure().data / "speech"
    speech.mkdir()
    (speech / WHISPER_TINY_EN.id).symlink_to(built_speech_model, target_is_directory=True)
    settings = Settings(voice=VoiceSettings(microphone=ALSA_PULSE_DEVICE, stop_at_end_of_speech=False))
    SettingsFile(data_paths().settings_file).save(settings)
    return speech


def dictation_state(window: MainWindow) -> DictationState:
    return window.doors.voice.state


def test_a_press_listens_shows_the_words_and_a_second_press_puts_them_in_the_box(
        loop, make_window, voice_home: Path, pulse: PulseServer) -> None:
    window = make_window(model=None)
    composer, bar = window.composer, window.composer.dictation_bar
    composer.edit.setPlainText("Quote:")
    composer.edit.moveCursor(composer.edit.textCursor().MoveOperation.End)
    assert not bar.isVisible() and pulse.source_outputs() == []
    composer.mic_button.click()
    # The press returned before the microphone opened: that happens on a thread, heard later on the loop.
    assert dictation_state(window) is DictationState.OPENING and composer.mic_button.isChecked()
    assert bar.isVisible() and bar.status.text() == said.OPENING and not bar.dot.isVisible()
    run(loop, until(lambda: dictation_state(window) is DictationState.LISTENING, 30, "the microphone to open"))
    assert bar.dot.isVisible() and bar.meter.isVisible() and bar.status.text() == said.LISTENING
    assert len(pulse.source_outputs()) == 1 and composer.mic_button.toolTip() == said.LISTENING_TIP
    player = subprocess.Popen(["paplay", f"--server={pulse.address}", str(BECKETT)])
    fills: list[float] = []
    try:
        run(loop, until(lambda: fills.append(bar.meter.fill) or bool(bar.words.text()), 60, "words while listening"))
        assert bar.dot.isVisible() and dictation_state(window) is DictationState.LISTENING  # still listening
        run(loop, until(lambda: fills.append(bar.meter.fill) or player.poll() is not None, 60, "the recording's end"))
    finally:
        player.kill()
        player.wait(10)
    assert max(fills) > 0.3  # the meter moved with the voice
    QTest.qWait(1500)  # the last words' hang-over
    QTest.keyClick(window, Qt.Key.Key_Space, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert dictation_state(window) is not DictationState.LISTENING  # the shortcut stops as the button does
    run(loop, until(lambda: dictation_state(window) is DictationState.IDLE, 60, "dictation to end"))
    text = composer.edit.toPlainText()
    assert text.startswith("Quote: ") and similarity(text[len("Quote: "):], BECKETT_SAID) >= 0.7, text
    assert not bar.isVisible() and not bar.dot.isVisible() and not composer.mic_button.isChecked()
    assert pulse.source_outputs() == []  # the microphone is closed
    assert composer.button.isEnabled()  # the words wait to be edited or sent


def test_no_microphone_is_said_in_words_and_the_button_is_ready_again(
        loop, make_window, voice_home: Path, pulse_without_devices: PulseServer) -> None:
    SettingsFile(data_paths().settings_file).save(Settings())  # the default microphone: there is none
    window = make_window(model=None)
    composer, bar = window.composer, window.composer.dictation_bar
    composer.mic_button.click()
    run(loop, until(lambda: dictation_state(window) is DictationState.IDLE, 30, "dictation to give up"))
    assert bar.isVisible() and bar.status.text() == device_words(DeviceUnavailable(DeviceProblem.NO_MICROPHONE))
    assert bar.close_button.isVisible() and not bar.dot.isVisible() and not composer.mic_button.isChecked()
    assert composer.edit.toPlainText() == ""
    assert not clipped(bar), clipped(bar)
    bar.close_button.click()
    assert not bar.isVisible()


def test_without_the_voice_packages_the_button_says_why_and_a_press_explains(
        loop, make_window, voice_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dictation_service, "VOICE_PACKAGES", (*dictation_service.VOICE_PACKAGES, "kestrel_no_such"))
    window = make_window(model=None)
    composer, bar = window.composer, window.composer.dictation_bar
    run(loop, until(lambda: "voice packages" in composer.mic_button.toolTip(), 30, "the check"))
    assert "kestrel_no_such" in composer.mic_button.toolTip() and "pip install" in composer.mic_button.toolTip()
    composer.mic_button.click()
    run(loop, until(lambda: bar.close_button.isVisible(), 30, "the explanation"))
    assert "pip install 'kestrel[voice]'" in bar.status.text() and "Traceback" not in bar.status.text()
    assert dictation_state(window) is DictationState.IDLE and not composer.mic_button.isChecked()


def test_with_send_at_once_the_words_are_sent_when_the_speech_ends(
        loop, make_window, voice_home: Path, pulse: PulseServer) -> None:
    window = make_window(engine=ScriptedEngine())
    settings = window.doors.settings.settings
    voice = VoiceSettings(send_at_once=True, stop_at_end_of_speech=True, microphone=ALSA_PULSE_DEVICE)
    run(loop, window.doors.settings.update_settings(dataclasses.replace(settings, voice=voice)))
    window.composer.mic_button.click()
    run(loop, until(lambda: dictation_state(window) is DictationState.LISTENING, 30, "the microphone to open"))
    player = subprocess.Popen(["paplay", f"--server={pulse.address}", str(BECKETT)])
    try:  # no second press: it ends with the first speech, by itself
        run(loop, until(lambda: dictation_state(window) is DictationState.IDLE, 60, "the end of speech"))
    finally:
        player.kill()
        player.wait(10)

    def asked() -> list[str]:
        return [message.text for message in window.doors.chat.messages if message.role is Role.USER]

    run(loop, until(lambda: bool(asked()), 30, "the message to be sent"))
    assert len(asked()) == 1 and "ever" in asked()[0].lower(), asked()
    assert window.composer.edit.toPlainText() == "" and not window.composer.dictation_bar.isVisible()
    assert pulse.source_outputs() == []


def test_the_voice_page_lists_the_microphones_when_shown_and_keeps_the_choices(
        loop, make_window, voice_home: Path, pulse: PulseServer) -> None:
    window = make_window(model=None)
    dialog = SettingsDialog(Settings(), window, adapter=window.adapter, microphones=window.doors.voice.microphones)
    page = dialog.voice
    assert [page.microphone.itemText(i) for i in range(page.microphone.count())] == [DEFAULT_MICROPHONE]
    dialog.show_page("voice")  # listed once shown, on a thread
    run(loop, until(lambda: page.microphone.findData(ALSA_PULSE_DEVICE) >= 0, 30, "the microphones"))
    assert not page.microphone_note.isVisible() and pulse.source_outputs() == []  # listing opened none
    page.send_at_once.setChecked(True)
    page.stop_at_end.setChecked(False)
    page.microphone.setCurrentIndex(page.microphone.findData(ALSA_PULSE_DEVICE))
    # The language: English first (the fast model), then any language, then each by its name.
    assert [page.language.itemData(i) for i in range(2)] == ["en", DETECT_LANGUAGE] and page.language.currentData() == "en"
    assert page.language.itemText(0) == "English (fastest)" and page.language.findText("German") >= 2
    page.language.setCurrentIndex(page.language.findText("German"))
    assert dialog.value().voice == VoiceSettings(send_at_once=True, stop_at_end_of_speech=False,
                                                 microphone=ALSA_PULSE_DEVICE, language="de")
    dialog.deleteLater()
