"""Voice mode through the service on a real sound server: a real recording played into a private PulseAudio's
microphone becomes the chat's message, the answer (scripted engine) is said by the real voice into its
speaker and heard back by Whisper, the microphone opens again; speech over the answer stops it; a hidden
window, silence and a missing microphone each end or pause it with the microphone closed."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core.conversation import MessageState, Role
from app.core.voice_settings import VoiceSettings
from app.service import events as ev
from app.service.models.background import WindowState
from app.service.voice import voice_mode as voice_mode_module
from app.service.voice.voice_mode_events import VoiceModeChanged, VoiceModeEnd, VoiceModeEnded, VoiceModeState
from app.voice.devices import DeviceProblem
from tests.helpers.pulse import ALSA_PULSE_DEVICE, MONITOR, ROOM, PulseServer, pulse_server
from tests.helpers.scripted_answers import Script, written
from tests.helpers.speech import BECKETT, built_speech_folder, link_speech_home
from tests.service.conftest import run

ANSWER = "Kestrels hover over open fields. They hunt mice and beetles."


@pytest.fixture(scope="module")
def built_speech(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_speech_folder(tmp_path_factory.mktemp("speech"))


@pytest.fixture
def room(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PulseServer]:
    """A private PulseAudio where Kestrel's speaker and the microphone are apart (as with headphones): the test
    speaks into ROOM, whose monitor is the microphone; Kestrel plays into the speaker."""
    with pulse_server(tmp_path / "pulse", room=True) as server:
        monkeypatch.setenv("PULSE_SERVER", server.address)
        yield server


@pytest.fixture
def loud_room(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PulseServer]:
    """The room, with loudspeakers: the microphone hears Kestrel's voice too (quieter than the person)."""
    with pulse_server(tmp_path / "pulse", room=True, loudspeakers=True) as server:
        monkeypatch.setenv("PULSE_SERVER", server.address)
        yield server


class Said:
    """A recording played into the room, as a person speaking; stop() ends it."""

    def __init__(self, pulse: PulseServer) -> None:
        self._player = subprocess.Popen(["paplay", f"--server={pulse.address}", f"--device={ROOM}", str(BECKETT)])

    def stop(self) -> None:
        self._player.kill()
        self._player.wait(10)


def playing(pulse: PulseServer) -> bool:
    """Kestrel's voice is playing into the speaker (a stream on it; the test's own go into the room)."""
    sink = next(line.split("\t")[0] for line in pulse.pactl("list", "short", "sinks").splitlines()
                if line.split("\t")[1] == MONITOR.removesuffix(".monitor"))
    return any(line.split("\t")[1] == sink for line in pulse.pactl("list", "short", "sink-inputs").splitlines()
               if line.strip())


async def with_voice(started, **voice: object) -> None:
    settings = started.doors.settings.settings
    await started.doors.settings.update_settings(dataclasses.replace(
        settings, voice=VoiceSettings(microphone=ALSA_PULSE_DEVICE, speaker=ALSA_PULSE_DEVICE, **voice)))  # type: ignore[arg-type]


class Watched:
    """Voice mode's events, in order, each with when it came."""

    def __init__(self, started) -> None:
        self.events: list[tuple[float, object]] = []
        started.doors.voice_mode.subscribe(lambda event: self.events.append((time.monotonic(), event)))

    def states(self) -> list[VoiceModeState]:
        return [event.state for _, event in self.events if isinstance(event, VoiceModeChanged)]

    async def until_state(self, state: VoiceModeState, after: int = 0, timeout: float = 90) -> float:
        deadline = time.monotonic() + timeout
        while True:
            for at, event in self.events[after:]:
                if isinstance(event, VoiceModeChanged) and event.state is state:
                    return at
            assert time.monotonic() < deadline, f"never {state}: {self.events}"
            await asyncio.sleep(0.01)

    async def until_ended(self, timeout: float = 60) -> VoiceModeEnded:
        deadline = time.monotonic() + timeout
        while not (ended := [event for _, event in self.events if isinstance(event, VoiceModeEnded)]):
            assert time.monotonic() < deadline, f"voice mode never ended: {self.events}"
            await asyncio.sleep(0.02)
        return ended[-1]


async def until(test, timeout: float = 30, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not test():
        assert time.monotonic() < deadline, f"timed out: {what}"
        await asyncio.sleep(0.02)


def test_a_spoken_question_is_sent_answered_aloud_and_the_microphone_opens_again(
        started_service, room: PulseServer, built_speech: Path) -> None:
    link_speech_home(built_speech)

    async def scenario() -> None:
        async with started_service() as started:
            await with_voice(started, interrupt_by_speaking=False)
            started.engine.scripts.append(dataclasses.replace(written(ANSWER), token_s=0.03))
            door, watched = started.doors.voice_mode, Watched(started)
            assert door.start() and door.state is VoiceModeState.LISTENING and not door.start()
            await until(lambda: len(room.source_outputs()) == 1, what="the microphone open")
            said = Said(room)
            try:
                await watched.until_state(VoiceModeState.THINKING)
            finally:
                said.stop()
            assert room.source_outputs() == []  # not interrupting: the microphone is closed while Kestrel answers
            await watched.until_state(VoiceModeState.SPEAKING)
            assert playing(room)
            listening_again = len(watched.events)
            await watched.until_state(VoiceModeState.LISTENING, after=listening_again, timeout=120)
            await until(lambda: len(room.source_outputs()) == 1, what="the microphone open again")
            assert not playing(room)
            assert watched.states() == [VoiceModeState.LISTENING, VoiceModeState.THINKING, VoiceModeState.SPEAKING,
                                        VoiceModeState.LISTENING]
            question, answer = started.doors.chat.messages[-2:]
            assert question.role is Role.USER and "ever" in question.text.lower(), question.text
            # the pauses between the recording's sentences do not end the turn (TURN_QUIET_MS after the last word)
            assert "tried" in question.text.lower() and "failed" in question.text.lower(), question.text
            assert answer.role is Role.ASSISTANT and answer.text.strip() == ANSWER
            assert answer.state is MessageState.COMPLETE
            door.stop()
            assert door.state is VoiceModeState.OFF
            await until(lambda: room.source_outputs() == [], what="the microphone closed at the end")
            assert isinstance(watched.events[-1][1], VoiceModeEnded)
            assert watched.events[-1][1].why is VoiceModeEnd.STOPPED

    run(scenario, 240)


def test_speech_over_the_answer_silences_it_stops_the_answer_and_is_the_next_message(
        started_service, loud_room: PulseServer, built_speech: Path) -> None:
    """With loudspeakers: the microphone hears Kestrel's voice the whole time it speaks, which neither stops the
    answer nor is sent back (app/voice/echo.py); the person speaking over it does both."""
    room = loud_room
    link_speech_home(built_speech)

    async def scenario() -> None:
        async with started_service() as started:
            await with_voice(started, interrupt_by_speaking=True)
            # A sentence a second for the test's 24 tokens: the answer is still being written when the person
            # speaks (a faster one ended first under load, and Stop then had nothing to stop).
            long = Script(text=tuple(f" Kestrels hover over field number {n}." for n in range(200)), endless=False,
                          token_s=1.0)
            started.engine.scripts.extend([long, written("Fine.")])
            door, watched, events = started.doors.voice_mode, Watched(started), started.events
            door.start()
            await until(lambda: len(room.source_outputs()) == 1, what="the microphone open")
            said = Said(room)
            try:
                await watched.until_state(VoiceModeState.THINKING)
            finally:
                said.stop()
            await until(lambda: len(room.source_outputs()) == 1, what="the microphone open while Kestrel answers")
            await watched.until_state(VoiceModeState.SPEAKING)
            await until(lambda: playing(room), what="the voice playing")
            first_answer = events.of(ev.AnswerStarted)[-1].message.id
            mark = len(watched.events)
            await asyncio.sleep(4.0)  # Kestrel's voice in the microphone: heard, and known for its own
            assert door.state is VoiceModeState.SPEAKING and playing(room), watched.events[mark:]
            assert len(started.doors.chat.messages) == 2 and watched.states()[mark:] == []
            interrupter = Said(room)
            try:
                await watched.until_state(VoiceModeState.LISTENING, after=mark, timeout=30)
                await until(lambda: not playing(room), timeout=5, what="the voice silenced")
                await watched.until_state(VoiceModeState.THINKING, after=mark, timeout=60)
            finally:
                interrupter.stop()
            stopped = [e for e in events.of(ev.AnswerFinished) if e.message.id == first_answer]
            assert stopped and stopped[0].message.stats.finish_reason == "cancelled"  # as Stop leaves it
            await until(lambda: len(started.doors.chat.messages) == 4, what="the spoken interruption sent")
            first, interrupted, second, _ = started.doors.chat.messages
            assert interrupted.id == first_answer and interrupted.stats.finish_reason == "cancelled"
            assert 0 < len(interrupted.text) < len("".join(long.text))
            assert second.role is Role.USER and "ever" in second.text.lower(), second.text
            assert "field" not in second.text.lower(), second.text  # the person's words, not Kestrel's voice
            door.stop()
            await until(lambda: room.source_outputs() == [] and not playing(room), what="all closed")

    run(scenario, 300)


def test_a_hidden_window_closes_the_microphone_until_it_is_shown(started_service, room: PulseServer,
                                                                  built_speech: Path) -> None:
    link_speech_home(built_speech)

    async def scenario() -> None:
        async with started_service() as started:
            await with_voice(started)
            door, watched = started.doors.voice_mode, Watched(started)
            door.start()
            await until(lambda: len(room.source_outputs()) == 1, what="the microphone open")
            started.doors.set_window_state(WindowState.HIDDEN)
            assert door.state is VoiceModeState.WAITING
            await until(lambda: room.source_outputs() == [], what="the microphone closed while hidden")
            started.doors.set_window_state(WindowState.FOREGROUND)
            assert door.state is VoiceModeState.LISTENING
            await until(lambda: len(room.source_outputs()) == 1, what="the microphone open again")
            assert watched.states() == [VoiceModeState.LISTENING, VoiceModeState.WAITING, VoiceModeState.LISTENING]
            door.stop()
            await until(lambda: room.source_outputs() == [], what="the microphone closed")

    run(scenario, 120)


def test_a_turn_goes_on_at_full_speed_while_the_window_is_hidden(started_service, room: PulseServer,
                                                                  built_speech: Path) -> None:
    link_speech_home(built_speech)

    async def scenario() -> None:
        async with started_service() as started:
            await with_voice(started, interrupt_by_speaking=False)
            settings = started.doors.settings.settings
            await started.doors.settings.update_settings(dataclasses.replace(settings, when_hidden="pause"))
            started.engine.scripts.append(dataclasses.replace(written(ANSWER), token_s=0.05))
            door, watched = started.doors.voice_mode, Watched(started)
            door.start()
            await until(lambda: len(room.source_outputs()) == 1, what="the microphone open")
            said = Said(room)
            try:
                await watched.until_state(VoiceModeState.THINKING)
            finally:
                said.stop()
            started.doors.set_window_state(WindowState.HIDDEN)  # mid-turn: the answer is not held
            assert started.service.session.pace.pace is ev.Pace.FULL
            mark = len(watched.events)
            await watched.until_state(VoiceModeState.WAITING, after=mark, timeout=120)  # said, then it waits
            assert started.doors.chat.messages[-1].text.strip() == ANSWER
            assert room.source_outputs() == []
            assert started.service.session.pace.pace is ev.Pace.PAUSED  # the turn over, the hidden window holds it
            door.stop()

    run(scenario, 240)


def test_silence_ends_voice_mode_and_closes_the_microphone(started_service, room: PulseServer, built_speech: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    link_speech_home(built_speech)
    monkeypatch.setattr(voice_mode_module, "SILENCE_LIMIT_S", 2.0)

    async def scenario() -> None:
        async with started_service() as started:
            await with_voice(started)
            door, watched = started.doors.voice_mode, Watched(started)
            door.start()
            ended = await watched.until_ended(30)
            assert ended.why is VoiceModeEnd.SILENCE and door.state is VoiceModeState.OFF
            await until(lambda: room.source_outputs() == [], what="the microphone closed")
            assert started.doors.chat.messages == []

    run(scenario, 120)


def test_no_microphone_ends_voice_mode_with_the_microphone_s_problem(started_service, pulse_without_devices,
                                                                   built_speech: Path) -> None:
    link_speech_home(built_speech)

    async def scenario() -> None:
        async with started_service() as started:
            await with_voice(started)
            door, watched = started.doors.voice_mode, Watched(started)
            door.start()
            ended = await watched.until_ended(30)
            assert ended.why is VoiceModeEnd.MICROPHONE and ended.dictation is not None
            assert ended.dictation.problem is DeviceProblem.NO_MICROPHONE, ended.dictation
            assert door.state is VoiceModeState.OFF and started.doors.voice.state.value == "idle"

    run(scenario, 120)
