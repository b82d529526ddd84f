"""Dictation's owner on a real sound server: speech played into a private PulseAudio's microphone comes back as words, as events on the loop."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
from pathlib import Path
from typing import Any

import psutil
import pytest

from app.core.settings import Settings, SettingsFile
from app.core.voice_settings import DETECT_LANGUAGE, VoiceSettings
from app.service.voice.dictation_events import (DictationEvent, DictationFinished, DictationHeard, DictationState,
                                                DictationStateChanged, VoiceMissing)
from app.service.voice.dictation_service import Dictation
from app.voice.devices import DeviceProblem
from app.voice.catalog.choice import dictation_model
from app.voice.speech_models import WHISPER_BASE, WHISPER_TINY_EN, ShippedFile, SpeechModel, ensure_speech_model
from tests.helpers.pulse import ALSA_PULSE_DEVICE, PulseServer
from tests.helpers.speech import BECKETT, BECKETT_SAID, similarity, voice_or_skip

NO_SUCH_MODEL = SpeechModel("whisper-nowhere", "Whisper nowhere",
                            (ShippedFile("model.bin", (("kestrel_no_such_package", "model.bin"),), 1, "0" * 64),),
                            multilingual=False, license="MIT", source="nowhere")


@pytest.fixture(scope="module")
def speech_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    voice_or_skip()
    folder = tmp_path_factory.mktemp("speech")
    ensure_speech_model(WHISPER_TINY_EN, folder)
    return folder


class Heard:
    """A Dictation over the loop's tasks, and every event it sent (on the loop)."""

    def __init__(self, settings: VoiceSettings, speech_folder: Path, model: SpeechModel | None = WHISPER_TINY_EN) -> None:
        self.tasks: set[asyncio.Task[Any]] = set()
        self.dictation = Dictation(lambda: settings, speech_folder, self._spawn, model)
        self.events: list[DictationEvent] = []
        self.dictation.subscribe(self.events.append)

    def _spawn(self, coroutine: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def until(self, kind: type, timeout: float = 60) -> Any:
        deadline = asyncio.get_running_loop().time() + timeout
        while not (found := [event for event in self.events if isinstance(event, kind)]):
            assert asyncio.get_running_loop().time() < deadline, f"no {kind.__name__}: {self.events}"
            await asyncio.sleep(0.02)
        return found[-1]

    def states(self) -> list[DictationState]:
        return [event.state for event in self.events if isinstance(event, DictationStateChanged)]


def test_speech_into_the_microphone_comes_back_as_words_and_the_second_dictation_keeps_the_model(
        pulse: PulseServer, speech_folder: Path) -> None:
    async def scenario() -> None:
        heard = Heard(VoiceSettings(microphone=ALSA_PULSE_DEVICE, stop_at_end_of_speech=False), speech_folder)
        dictation = heard.dictation
        assert dictation.start() and dictation.state is DictationState.OPENING  # returned before the mic opened
        assert not dictation.start()  # one dictation at a time
        await heard.until(DictationStateChanged)
        while dictation.state is DictationState.OPENING:
            await asyncio.sleep(0.02)
        assert dictation.state is DictationState.LISTENING and len(pulse.source_outputs()) == 1
        player = await asyncio.to_thread(subprocess.run, ["paplay", f"--server={pulse.address}", str(BECKETT)],
                                         timeout=60)
        assert player.returncode == 0
        live = await heard.until(DictationHeard)  # words came while it was still listening
        assert dictation.state is DictationState.LISTENING and live.text
        await asyncio.sleep(1.5)  # the last words' hang-over
        dictation.toggle()
        finished: DictationFinished = await heard.until(DictationFinished)
        assert finished.ended_well and similarity(finished.text, BECKETT_SAID) >= 0.7, finished.text
        assert heard.states() == [DictationState.OPENING, DictationState.LISTENING, DictationState.FINISHING,
                                  DictationState.IDLE]
        assert dictation.level is None and pulse.source_outputs() == []  # the microphone is closed
        child = dictation._transcriber.pid if dictation._transcriber else None
        assert child is not None
        heard.events.clear()
        assert dictation.start()
        while dictation.state is not DictationState.LISTENING:
            await asyncio.sleep(0.02)
        dictation.stop()
        second: DictationFinished = await heard.until(DictationFinished)
        assert second.ended_well and second.text == ""
        assert dictation._transcriber is not None and dictation._transcriber.pid == child  # not loaded again
        await dictation.close()
        assert dictation._transcriber.pid is None

    asyncio.run(asyncio.wait_for(scenario(), 180))


def test_a_model_about_to_be_removed_is_let_go_unless_dictation_listens_with_it(
        pulse: PulseServer, speech_folder: Path) -> None:
    """Models → Speech's Remove asks first (Windows will not delete a file a process holds open): the transcription
    child of that model ends, another model's stays, and a dictation under way keeps its model."""
    async def scenario() -> None:
        heard = Heard(VoiceSettings(microphone=ALSA_PULSE_DEVICE, stop_at_end_of_speech=False), speech_folder)
        dictation = heard.dictation
        assert dictation.start()
        while dictation.state is not DictationState.LISTENING:
            await asyncio.sleep(0.02)
        assert not await dictation.release(WHISPER_TINY_EN.id)  # listening with it
        dictation.stop()
        await heard.until(DictationFinished)
        transcriber = dictation._transcriber
        assert transcriber is not None
        while transcriber.pid is None:  # its child starts while the microphone opens
            await asyncio.sleep(0.05)
        child = transcriber.pid
        assert await dictation.release("whisper-base") and transcriber.pid == child  # another model's: kept
        assert await dictation.release(WHISPER_TINY_EN.id) and dictation._transcriber is None
        assert transcriber.pid is None and not psutil.pid_exists(child)
        await dictation.close()

    asyncio.run(asyncio.wait_for(scenario(), 120))


def test_it_stops_by_itself_at_the_end_of_speech(pulse: PulseServer, speech_folder: Path) -> None:
    async def scenario() -> None:
        heard = Heard(VoiceSettings(microphone=ALSA_PULSE_DEVICE, stop_at_end_of_speech=True, send_at_once=True),
                      speech_folder)
        heard.dictation.start()
        while heard.dictation.state is not DictationState.LISTENING:
            await asyncio.sleep(0.02)
        player = subprocess.Popen(["paplay", f"--server={pulse.address}", str(BECKETT)])
        try:
            finished: DictationFinished = await heard.until(DictationFinished, 60)
        finally:
            player.kill()
            player.wait(10)
        assert finished.ended_well and finished.send_at_once and "ever" in finished.text.lower(), finished.text
        assert "better" not in finished.text.lower()  # it ended with the first speech, not the recording
        assert pulse.source_outputs() == []
        await heard.dictation.close()

    asyncio.run(asyncio.wait_for(scenario(), 120))


def test_a_microphone_unplugged_mid_dictation_ends_in_a_problem_keeping_the_words(
        pulse: PulseServer, speech_folder: Path) -> None:
    async def scenario() -> None:
        heard = Heard(VoiceSettings(microphone=ALSA_PULSE_DEVICE, stop_at_end_of_speech=False), speech_folder)
        heard.dictation.start()
        while heard.dictation.state is not DictationState.LISTENING:
            await asyncio.sleep(0.02)
        player = subprocess.Popen(["paplay", f"--server={pulse.address}", str(BECKETT)])
        try:
            await heard.until(DictationHeard)  # "Ever tried." was heard
            await asyncio.to_thread(pulse.unload_null_sink)
            finished: DictationFinished = await heard.until(DictationFinished, 30)
        finally:
            player.kill()
            player.wait(10)
        assert finished.problem is DeviceProblem.DEVICE_LOST and "ever" in finished.text.lower(), finished
        assert heard.dictation.state is DictationState.IDLE and heard.dictation.level is None
        await heard.dictation.close()

    asyncio.run(asyncio.wait_for(scenario(), 120))


def test_closing_while_listening_closes_the_microphone_and_the_transcriber(
        pulse: PulseServer, speech_folder: Path) -> None:
    """Kestrel shutting down mid-dictation: the microphone closes, the child ends, the end is still told."""
    async def scenario() -> None:
        heard = Heard(VoiceSettings(microphone=ALSA_PULSE_DEVICE, stop_at_end_of_speech=False), speech_folder)
        heard.dictation.start()
        while heard.dictation.state is not DictationState.LISTENING:
            await asyncio.sleep(0.02)
        assert len(pulse.source_outputs()) == 1
        await heard.dictation.close()
        assert isinstance(heard.events[-1], DictationFinished) and heard.dictation.state is DictationState.IDLE
        assert pulse.source_outputs() == []
        transcriber = heard.dictation._transcriber
        assert transcriber is not None and transcriber.pid is None

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_no_microphone_ends_in_a_problem_not_a_hang(pulse_without_devices: PulseServer, speech_folder: Path) -> None:
    async def scenario() -> None:
        heard = Heard(VoiceSettings(), speech_folder)
        assert heard.dictation.start()
        finished: DictationFinished = await heard.until(DictationFinished, 30)
        assert finished.problem is DeviceProblem.NO_MICROPHONE and finished.text == ""
        assert heard.states() == [DictationState.OPENING, DictationState.IDLE]
        await heard.dictation.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_a_missing_speech_model_is_said_before_and_at_the_press(tmp_path: Path) -> None:
    async def scenario() -> None:
        heard = Heard(VoiceSettings(), tmp_path / "speech", NO_SUCH_MODEL)
        available = await heard.dictation.check()
        assert available.missing is VoiceMissing.SPEECH_MODEL and not available.ready
        assert heard.dictation.start()
        finished: DictationFinished = await heard.until(DictationFinished, 30)
        assert finished.missing is VoiceMissing.SPEECH_MODEL and not finished.ended_well
        assert heard.states() == [DictationState.OPENING, DictationState.IDLE]

    voice_or_skip()
    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_the_voice_settings_survive_the_file_and_a_bad_one_is_reset_alone(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    chosen = Settings(voice=VoiceSettings(send_at_once=True, stop_at_end_of_speech=False, microphone="USB headset",
                                          read_aloud_answers=True, speaker="Desk speakers", voice_speed=1.3,
                                          language="de", interrupt_by_speaking=False, speech_model="whisper-small",
                                          voice="en_US-amy-medium"))
    SettingsFile(path).save(chosen)
    assert json.loads(path.read_text(encoding="utf-8"))["voice"] == \
        {"send_at_once": True, "stop_at_end_of_speech": False, "microphone": "USB headset",
         "read_aloud_answers": True, "speaker": "Desk speakers", "voice_speed": 1.3, "language": "de",
         "interrupt_by_speaking": False, "speech_model": "whisper-small", "voice": "en_US-amy-medium"}
    assert SettingsFile(path).load() == chosen
    path.write_text(json.dumps({"theme": "dark", "voice": {"send_at_once": "yes", "stop_at_end_of_speech": False,
                                                            "microphone": "", "language": "klingon",
                                                            "speech_model": 7, "voice": " "}}),
                    encoding="utf-8")
    reading = SettingsFile(path)
    settings = reading.load()
    assert settings.theme == "dark" and settings.voice == VoiceSettings(stop_at_end_of_speech=False)
    assert reading.last_problem is not None
    assert all(f"voice.{name}" in reading.last_problem
               for name in ("send_at_once", "microphone", "language", "speech_model", "voice"))
    with pytest.raises(ValueError, match="voice.language must be 'detect' or a language code Whisper knows.*'klingon'"):
        VoiceSettings(language="klingon").validated()


def test_the_language_setting_chooses_the_model_a_press_listens_with(pulse: PulseServer, speech_folder: Path) -> None:
    """Any language: the multilingual model detects English; English again: the fast model, the other's child
    ended (one transcription child at a time)."""
    voice: list[VoiceSettings] = [VoiceSettings(microphone=ALSA_PULSE_DEVICE, language=DETECT_LANGUAGE)]

    async def dictate(heard: Heard) -> DictationFinished:
        heard.events.clear()
        heard.dictation.start()
        while heard.dictation.state is not DictationState.LISTENING:
            await asyncio.sleep(0.02)
        player = subprocess.Popen(["paplay", f"--server={pulse.address}", str(BECKETT)])
        try:
            return await heard.until(DictationFinished, 90)
        finally:
            player.kill()
            player.wait(10)

    async def scenario() -> None:
        heard = Heard(voice[0], speech_folder, None)
        heard.dictation = Dictation(lambda: voice[0], speech_folder, heard._spawn)  # the settings as they change
        heard.dictation.subscribe(heard.events.append)
        detected = await dictate(heard)
        assert detected.ended_well and "ever" in detected.text.lower(), detected.text
        multilingual = heard.dictation._transcriber
        assert multilingual is not None and multilingual.model == WHISPER_BASE and multilingual.pid is not None
        voice[0] = dataclasses.replace(voice[0], language="en")
        english = await dictate(heard)
        assert english.ended_well and "ever" in english.text.lower(), english.text
        assert heard.dictation._transcriber is not None and heard.dictation._transcriber.model == WHISPER_TINY_EN
        assert multilingual.pid is None  # its child ended when the language changed
        await heard.dictation.close()

    asyncio.run(asyncio.wait_for(scenario(), 240))


@pytest.mark.parametrize("language, model, told", [("en", WHISPER_TINY_EN, "en"), ("de", WHISPER_BASE, "de"),
                                                   (DETECT_LANGUAGE, WHISPER_BASE, None)])
def test_each_language_setting_takes_its_model(language: str, model: SpeechModel, told: str | None) -> None:
    assert dictation_model(language) == (model, told)
    assert dictation_model(language, WHISPER_TINY_EN) == (WHISPER_TINY_EN, None)  # a given English-only model
