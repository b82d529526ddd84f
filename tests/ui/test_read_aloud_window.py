"""An answer's speaker in the window: a press reads it into a private PulseAudio's speaker and turns into Stop, a
second press (or Esc) silences it; the shortcut, the menu's words, a missing speaker said in the banner; Settings → Voice."""

from __future__ import annotations

import time
import dataclasses
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.core.settings import Settings
from app.core.voice_settings import VoiceSettings
from app.service.voice.read_aloud_events import ReadAloudState
from app.ui.messages.message_actions import TIPS
from app.ui.settings.dialogs import SettingsDialog
from app.ui.settings.voice_settings_page import DEFAULT_SPEAKER
from app.voice.device_words import device_words
from app.voice.devices import DeviceProblem, DeviceUnavailable
from app.voice.synthesis.voices import JOE, ENGLISH_G2P, ensure_bundle, voice_shipped
from tests.helpers.pulse import ALSA_PULSE_DEVICE, PulseServer
from tests.helpers.scripted_answers import Script
from tests.helpers.scripted_engine import ScriptedEngine
from tests.helpers.speech import link_speech_home
from tests.ui.conftest import idle, run, until


@pytest.fixture(scope="module")
def built_voice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The voice and the pronunciation data put together once for this module (by the app's own code)."""
    if not voice_shipped(JOE):
        pytest.skip("the voice packages are not installed (pip install 'kestrel[voice]')")
    folder = tmp_path_factory.mktemp("speech")
    ensure_bundle(JOE.bundle, folder)
    ensure_bundle(ENGLISH_G2P, folder)
    return folder


def reading_window(make_window, loop, engine: ScriptedEngine, voice: VoiceSettings):
    window = make_window(engine=engine)
    settings = window.doors.settings.settings
    run(loop, window.doors.settings.update_settings(dataclasses.replace(settings, voice=voice)))
    return window


def answered(make_window, loop, text: str, speaker: str):
    """A window whose chat has one question and its answer, reading aloud on speaker."""
    window = reading_window(make_window, loop, ScriptedEngine(), VoiceSettings(speaker=speaker))
    assert window.doors.chat.send(text)
    run(loop, until(idle(window)))
    run(loop, until(lambda: window.adapter.messages.rowCount() == 2
                    and window.adapter.messages.messages()[-1].state.value != "streaming", what="the answer shown"))
    return window


def actions(window) -> dict:
    return dict(window.messages.delegate.action_rects(window.adapter.messages.index(1)))


def playing(pulse: PulseServer) -> bool:
    return bool(pulse.pactl("list", "short", "sink-inputs").strip())


def test_the_speaker_reads_the_answer_and_a_second_press_or_escape_stops_it(
        make_window, loop, qtbot, built_voice: Path, pulse: PulseServer) -> None:
    link_speech_home(built_voice)
    window = answered(make_window, loop, "Tell me about kestrels.", ALSA_PULSE_DEVICE)
    door, view = window.doors.read_aloud, window.messages
    assert list(actions(window)) == ["copy", "read-aloud", "regenerate", "remember"]
    send_tip = window.composer.button.toolTip()
    pressed = time.monotonic()
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=actions(window)["read-aloud"].center())
    # The press returned before anything was said: the voice loads on a thread, heard later on the loop.
    assert door.state is ReadAloudState.PREPARING and door.message_id == window.adapter.messages.messages()[1].id
    assert "stop-reading" in actions(window) and "read-aloud" not in actions(window)
    assert "Stop reading" in TIPS["stop-reading"]
    run(loop, until(lambda: door.state is ReadAloudState.SPEAKING, 90, "the first sound"))
    print(f"press to first sound in the window (the voice loaded first): {time.monotonic() - pressed:.2f} s")
    assert playing(pulse) and window.composer.button.toolTip() == send_tip  # the composer does not change
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=actions(window)["stop-reading"].center())
    assert door.state is ReadAloudState.IDLE and "read-aloud" in actions(window)
    run(loop, until(lambda: not playing(pulse), 5, "the sound to stop"))
    # The shortcut reads the current answer; Escape in the messages stops it.
    view.setCurrentIndex(window.adapter.messages.index(1))
    QTest.keyClick(window, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert door.state is ReadAloudState.PREPARING
    run(loop, until(lambda: door.state is ReadAloudState.SPEAKING, 60, "the second reading"))
    view.setFocus()
    QTest.keyClick(view, Qt.Key.Key_Escape)
    assert door.state is ReadAloudState.IDLE
    run(loop, until(lambda: not playing(pulse), 5, "the sound to stop"))
    assert window.banner.text() == ""


def test_with_the_setting_on_an_answer_is_heard_while_it_is_written_and_its_stop_shows(
        make_window, loop, qtbot, built_voice: Path, pulse: PulseServer) -> None:
    link_speech_home(built_voice)
    engine = ScriptedEngine()
    # A first sentence at once, then the rest slowly: it is still being written while the first is heard.
    engine.scripts.append(Script(text=("Kestrels", " hover", " over", " fields.", " ", *[" and"] * 40, " done."),
                                 endless=False, token_s=0.25))
    window = reading_window(make_window, loop, engine, VoiceSettings(speaker=ALSA_PULSE_DEVICE,
                                                                     read_aloud_answers=True))
    door = window.doors.read_aloud
    assert window.doors.chat.send("Tell me about kestrels.")
    run(loop, until(lambda: door.state is ReadAloudState.SPEAKING, 90, "the first sentence heard"))
    answer = window.adapter.messages.messages()[-1]
    assert answer.state.value == "streaming" and door.message_id == answer.id  # before the answer ends
    assert list(actions(window)) == ["stop-reading"] and playing(pulse)
    window.messages.setFocus()
    QTest.keyClick(window.messages, Qt.Key.Key_Escape)
    assert door.state is ReadAloudState.IDLE
    run(loop, until(lambda: not playing(pulse), 5, "the sound to stop"))
    assert window.adapter.messages.messages()[-1].state.value == "streaming"  # the answer goes on, silently
    run(loop, until(idle(window), 60))
    assert door.state is ReadAloudState.IDLE and not playing(pulse)


def test_a_missing_speaker_is_said_in_the_banner(make_window, loop, qtbot, built_voice: Path,
                                                 pulse: PulseServer) -> None:
    link_speech_home(built_voice)
    window = answered(make_window, loop, "Hello?", "Headphones that were unplugged")
    qtbot.mouseClick(window.messages.viewport(), Qt.MouseButton.LeftButton,
                     pos=actions(window)["read-aloud"].center())
    run(loop, until(lambda: bool(window.banner.text()), 90, "the problem said"))
    assert window.banner.text() == device_words(DeviceUnavailable(DeviceProblem.NO_SPEAKER))
    assert window.doors.read_aloud.state is ReadAloudState.IDLE and "read-aloud" in actions(window)


def test_the_voice_page_lists_the_speakers_when_shown_and_keeps_the_choices(
        loop, make_window, pulse: PulseServer) -> None:
    window = make_window(model=None)
    dialog = SettingsDialog(Settings(), window, adapter=window.adapter, microphones=window.doors.voice.microphones)
    page = dialog.voice
    page.use_speakers(window.doors.read_aloud.speakers)
    assert [page.speaker.itemText(i) for i in range(page.speaker.count())] == [DEFAULT_SPEAKER]
    assert not page.read_answers.isChecked() and page.speed.value() == 1.0
    dialog.show_page("voice")  # listed once shown, on a thread
    run(loop, until(lambda: page.speaker.findData(ALSA_PULSE_DEVICE) >= 0, 30, "the speakers"))
    assert not page.speaker_note.isVisible() and not playing(pulse)  # listing played nothing
    page.read_answers.setChecked(True)
    page.speaker.setCurrentIndex(page.speaker.findData(ALSA_PULSE_DEVICE))
    page.speed.setValue(1.3)
    assert dialog.value().voice == VoiceSettings(read_aloud_answers=True, speaker=ALSA_PULSE_DEVICE, voice_speed=1.3)
    dialog.deleteLater()
