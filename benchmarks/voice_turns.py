"""Voice to voice and barge-in through voice mode, timed from the sound itself (issue 38); run by benchmarks/voice.py.

A real Service (the real engine with the starter model, Whisper tiny.en, the Piper voice) over a fresh Kestrel
home, driven through the window's doors, on a private PulseAudio with two null sinks: the room, whose monitor is
Kestrel's microphone, and Kestrel's speaker (as with headphones: the microphone does not hear the voice). The
person is a WAV played into the room with paplay. Both monitors are recorded by parec; a sample's time is its
index over the rate plus the least lag any nearby block arrived with, so the ends and starts of speech come
from the samples, not from when a player was started.

Voice to voice (interrupt_by_speaking off): a question is played; from the end of its speech in the room to the
first sound of the answer on the speaker, and where the time went, each part from a timed event:
  silence      speech end in the room -> the start of the transcription whose words were sent: the early words
               at 200 ms of silence (app/voice/dictation.py), or the detector's end of speech after its 500 ms
               hang-over, plus the microphone's latency and the block being read;
  words        -> DictationFinished (Whisper on the utterance, then, unless it was a question, the turn's
                  quiet: TURN_QUIET_MS after the last word; the microphone closed);
  sent         -> voice mode sent the words (VoiceModeChanged THINKING);
  first token  -> the answer's first TextGrew (the prompt read, the first token made);
  first clause -> the voice was handed its first piece (Reading.say: a clause or a sentence);
  voice        -> the first sound on the speaker (the Piper voice made it, the stream opened, the sink played).
The rest of each answer is not waited for: 0.3 s after its first sound the voice is stopped as Esc does, and
voice mode listens again. The first turn (the children starting, the engine's first prompt) is kept apart.

Barge-in (interrupt_by_speaking on): a question that gets a long answer; once the voice has spoken a while, the
real recording's "Ever tried." is played over it; from its onset in the room to the speaker's last sound.
Voice mode is then ended (the interruption's words dropped) and started again for the next try.
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
import wave
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BECKETT = ROOT / "tests" / "fixtures" / "speech" / "beckett.wav"
# Its first utterance, "Ever tried.": speech ends near 1.2 s, the next begins near 1.8 s.
BECKETT_FIRST_S = 1.6
QUESTIONS = ("What is the capital of France?", "What is the largest ocean?", "How far away is the moon?",
             "Why is the sky blue?", "What is a good name for a cat?")
LONG_QUESTION = "Tell me a long story about a kestrel and a fox."
RATE = 16_000
FRAME = RATE // 100  # 10 ms
SPEAKER_LOUD = 300  # peak of a 10 ms frame on the speaker's monitor (digital silence otherwise)
SETTLE_S = 0.5  # the room's silence before each question, with the microphone open
HEAR_AFTER_SOUND_S = 0.3  # how much of each answer is heard before the voice is stopped
BARGE_IN_AFTER_S = (1.0, 1.4, 1.8, 2.2)  # how long the voice speaks before the person does, try by try
VOICE_TO_VOICE_GOAL_S = 1.5
BARGE_IN_GOAL_MS = 200.0
ROOM, SPEAKER = "kestrel_room", "kestrel_speaker"


# --- the sound server and its monitors ------------------------------------------------------------------


def missing_tools() -> list[str]:
    return [tool for tool in ("pulseaudio", "pactl", "parec", "paplay") if shutil.which(tool) is None]


@contextmanager
def private_pulse(runtime: Path) -> Iterator[str]:
    """A private PulseAudio with the room and the speaker (tests/helpers/pulse.py's, room=True): its address."""
    runtime.mkdir(parents=True, exist_ok=True)
    address = f"unix:{runtime}/native"
    env = {**os.environ, "HOME": str(runtime), "XDG_RUNTIME_DIR": str(runtime), "PULSE_RUNTIME_PATH": str(runtime),
           "PULSE_STATE_PATH": str(runtime)}
    log = (runtime / "pulseaudio.log").open("wb")
    process = subprocess.Popen(
        ["pulseaudio", "--daemonize=no", "-n", "--exit-idle-time=-1", "--use-pid-file=no", "--disable-shm=yes",
         "--log-target=stderr", f"--load=module-native-protocol-unix socket={runtime}/native auth-anonymous=1",
         f"--load=module-null-sink sink_name={SPEAKER}", f"--load=module-null-sink sink_name={ROOM}"],
        env=env, stdout=log, stderr=log, cwd=runtime)
    try:
        deadline = time.monotonic() + 15
        while subprocess.run(["pactl", f"--server={address}", "info"], capture_output=True).returncode != 0:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"PulseAudio did not start: {(runtime / 'pulseaudio.log').read_text()[-500:]}")
            time.sleep(0.1)
        for what, name in (("set-default-sink", SPEAKER), ("set-default-source", f"{ROOM}.monitor")):
            subprocess.run(["pactl", f"--server={address}", what, name], check=True, capture_output=True)
        yield address
    finally:
        process.terminate()
        process.wait(10)
        log.close()


class Monitor:
    """parec on a sink's monitor, 16 kHz mono, each block kept with when it came: loud frames found by time."""

    def __init__(self, address: str, sink: str) -> None:
        self._process = subprocess.Popen(
            ["parec", f"--server={address}", f"--device={sink}.monitor", "--format=s16le", f"--rate={RATE}",
             "--channels=1", "--raw", "--latency-msec=10"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._pcm = bytearray()
        self._counts: list[int] = []  # samples received after each block
        self._arrivals: list[float] = []  # when each block came
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        pipe = self._process.stdout.fileno()
        while chunk := os.read(pipe, 1024):
            self._pcm += chunk
            self._counts.append(len(self._pcm) // 2)
            self._arrivals.append(time.monotonic())

    def close(self) -> None:
        self._process.terminate()
        self._process.wait(10)
        self._reader.join(10)

    def _lag(self, index: int) -> float:
        """monotonic - index / RATE for samples near index: the least any block within 5 s of it arrived with
        (the others waited in a buffer or for the CPU)."""
        known = len(self._arrivals)
        if not known:
            return time.monotonic() - index / RATE
        counts = self._counts
        low = bisect.bisect_left(counts, index - 5 * RATE, 0, known)
        high = bisect.bisect_right(counts, index + 5 * RATE, 0, known)
        if low >= high:
            low, high = max(0, known - 50), known
        return min(self._arrivals[k] - counts[k] / RATE for k in range(low, high))

    def time_of(self, index: int) -> float:
        return index / RATE + self._lag(index)

    def index_of(self, at: float) -> int:
        guess = max(0, round((at - self._lag(len(self._pcm) // 2)) * RATE))
        return max(0, round((at - self._lag(guess)) * RATE))

    def _peaks(self, start: float, end: float | None) -> tuple[int, np.ndarray]:
        """The first frame's sample index and each 10 ms frame's peak from start to end (None: now)."""
        first = self.index_of(start) // FRAME * FRAME
        last = len(self._pcm) // 2 if end is None else min(len(self._pcm) // 2, self.index_of(end))
        count = max(0, (last - first) // FRAME)
        samples = np.frombuffer(bytes(self._pcm[2 * first:2 * (first + count * FRAME)]), "<i2")
        return first, np.abs(samples.reshape(count, FRAME).astype(np.int32)).max(axis=1)

    def first_loud(self, start: float, loud: int, end: float | None = None) -> float | None:
        """When the first frame at least `loud` after start begins (None: none yet)."""
        first, peaks = self._peaks(start, end)
        hits = np.flatnonzero(peaks >= loud)
        return self.time_of(first + int(hits[0]) * FRAME) if hits.size else None

    def last_loud(self, start: float, end: float, loud: int) -> float | None:
        """When the last frame at least `loud` between start and end ends (None: there is none)."""
        first, peaks = self._peaks(start, end)
        hits = np.flatnonzero(peaks >= loud)
        return self.time_of(first + (int(hits[-1]) + 1) * FRAME) if hits.size else None


@dataclass(frozen=True)
class Speech:
    """A WAV that the person says into the room; loud: the peak that counts as speech in it (24 dB below its
    loudest: a real recording's room noise stays under it)."""

    path: Path
    said: str
    seconds: float
    loud: int


def speech_file(path: Path, said: str) -> Speech:
    with wave.open(str(path), "rb") as reader:
        samples = np.frombuffer(reader.readframes(reader.getnframes()), "<i2")
        seconds = reader.getnframes() / reader.getframerate()
    return Speech(path, said, seconds, max(SPEAKER_LOUD, int(np.abs(samples.astype(np.int32)).max()) // 16))


def beckett_first(folder: Path) -> Speech:
    """The real recording's first utterance, "Ever tried.", with half a second of silence after it."""
    with wave.open(str(BECKETT), "rb") as reader:
        frames = reader.readframes(int(BECKETT_FIRST_S * reader.getframerate()))
        params = reader.getparams()
    path = folder / "ever-tried.wav"
    with wave.open(str(path), "wb") as writer:
        writer.setparams(params)
        writer.writeframes(frames + bytes(RATE))
    return speech_file(path, "Ever tried.")


def synthetic(folder: Path, speech: Path, texts: tuple[str, ...]) -> list[Speech]:
    """Each text said once by Kestrel's own Piper voice, as WAV files: the synthetic person."""
    from app.voice.synthesis.synthesizer import Synthesizer, wav_file
    synthesizer = Synthesizer(speech)
    try:
        said = []
        for n, text in enumerate(texts):
            path = folder / f"question-{n}.wav"
            path.write_bytes(wav_file(synthesizer.speak(text)))
            said.append(speech_file(path, text))
        return said
    finally:
        synthesizer.close()


# --- what happens inside, timed -------------------------------------------------------------------------


class Probes:
    """The detector's speech events, each transcription, each piece handed to the voice and each stop of its
    sound, with their times: the public methods wrapped for the run (none of these is a service event)."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, str, Any]] = []

    @contextmanager
    def installed(self) -> Iterator[Probes]:
        from app.service.voice.read_aloud_reading import Reading
        from app.voice.playback import Playback
        from app.voice.transcriber import Transcriber
        from app.voice.vad import SpeechEnded, SpeechStarted, VoiceActivity
        feed, transcribe, say, stop = VoiceActivity.feed, Transcriber.transcribe, Reading.say, Playback.stop
        seen = self.seen

        def timed_feed(vad: Any, frame: Any) -> Any:
            events = feed(vad, frame)
            for event in events:
                kind = "speech_started" if isinstance(event, SpeechStarted) else "speech_ended"
                assert isinstance(event, (SpeechStarted, SpeechEnded))
                seen.append((time.monotonic(), kind, event))
            return events

        def timed_transcribe(transcriber: Any, ask: Any) -> Any:
            start = time.monotonic()
            try:
                return transcribe(transcriber, ask)
            finally:
                seen.append((start, "transcribed", time.monotonic() - start))

        def timed_say(reading: Any, text: str) -> None:
            if text.strip():
                seen.append((time.monotonic(), "said", text))
            say(reading, text)

        def timed_stop(playback: Any) -> Any:
            start = time.monotonic()
            try:
                return stop(playback)
            finally:
                seen.append((start, "sound_stopped", time.monotonic() - start))

        wrapped = ((VoiceActivity, "feed", timed_feed), (Transcriber, "transcribe", timed_transcribe),
                   (Reading, "say", timed_say), (Playback, "stop", timed_stop))
        for owner, name, wrapper in wrapped:
            setattr(owner, name, wrapper)
        try:
            yield self
        finally:
            for owner, name, original in ((VoiceActivity, "feed", feed), (Transcriber, "transcribe", transcribe),
                                          (Reading, "say", say), (Playback, "stop", stop)):
                setattr(owner, name, original)

    def first(self, kind: str, after: float) -> tuple[float, Any] | None:
        return next(((at, what) for at, seen, what in list(self.seen) if seen == kind and at >= after), None)

    def last(self, kind: str, after: float, before: float) -> tuple[float, Any] | None:
        return next(((at, what) for at, seen, what in reversed(list(self.seen))
                     if seen == kind and after <= at <= before), None)


class Log:
    """Every event of the service, voice mode, dictation and read-aloud, in order, each with when it came
    (all heard on the loop, so in the order of their times)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.events: list[object] = []

    def hear(self, event: object) -> None:
        self.times.append(time.monotonic())
        self.events.append(event)

    def first(self, test: Callable[[object], bool], after: float) -> tuple[float, Any] | None:
        for n in range(bisect.bisect_left(self.times, after), len(self.events)):
            if test(self.events[n]):
                return self.times[n], self.events[n]
        return None

    async def until(self, test: Callable[[object], bool], after: float, timeout: float, what: str) -> tuple[float, Any]:
        deadline = time.monotonic() + timeout
        while (found := self.first(test, after)) is None:
            if time.monotonic() > deadline:
                raise TurnFailed(f"no {what} within {timeout:.0f} s")
            await asyncio.sleep(0.01)
        return found


class TurnFailed(Exception):
    """A turn or a try that did not go as planned (the words not heard, no answer): said, and counted."""


def is_state(state: Any) -> Callable[[object], bool]:
    from app.service.voice.voice_mode_events import VoiceModeChanged
    return lambda event: isinstance(event, VoiceModeChanged) and event.state is state


def dictation_is(state: Any) -> Callable[[object], bool]:
    from app.service.voice.dictation_events import DictationStateChanged
    return lambda event: isinstance(event, DictationStateChanged) and event.state is state


# --- the run ----------------------------------------------------------------------------------------------


class VoiceRoom:
    """The service in its home, the room, the monitors, the probes and the log: turns and tries on them."""

    def __init__(self, doors: Any, address: str, probes: Probes, log: Log) -> None:
        self.doors, self.address, self.probes, self.log = doors, address, probes, log
        self.room = Monitor(address, ROOM)
        self.speaker = Monitor(address, SPEAKER)

    def close(self) -> None:
        self.room.close()
        self.speaker.close()

    def play(self, speech: Speech) -> subprocess.Popen[bytes]:
        return subprocess.Popen(["paplay", f"--server={self.address}", f"--device={ROOM}", str(speech.path)])

    async def listening(self) -> None:
        """Wait until voice mode listens with its microphone open, then leave the room quiet a moment."""
        from app.service.voice.dictation_events import DictationState
        from app.service.voice.voice_mode_events import VoiceModeState
        deadline = time.monotonic() + 60
        while self.doors.voice_mode.state is not VoiceModeState.LISTENING or \
                self.doors.voice.state is not DictationState.LISTENING:
            if time.monotonic() > deadline:
                raise TurnFailed(f"not listening: {self.doors.voice_mode.state}, {self.doors.voice.state}")
            await asyncio.sleep(0.01)
        await asyncio.sleep(SETTLE_S)

    async def heard_and_sent(self, played: float) -> float:
        """When voice mode sent what it heard after `played` (TurnFailed: it heard no words)."""
        from app.service.voice.dictation_events import DictationFinished
        from app.service.voice.voice_mode_events import VoiceModeEnded, VoiceModeState
        at, finished = await self.log.until(lambda e: isinstance(e, (DictationFinished, VoiceModeEnded)), played, 60,
                                            "words heard")
        if isinstance(finished, VoiceModeEnded) or not finished.text.strip():
            raise TurnFailed(f"nothing sent: {finished}")
        return (await self.log.until(is_state(VoiceModeState.THINKING), at, 30, "message sent"))[0]

    async def first_sound(self, after: float, timeout: float = 120) -> float:
        deadline = time.monotonic() + timeout
        while (sound := self.speaker.first_loud(after, SPEAKER_LOUD)) is None:
            if time.monotonic() > deadline:
                raise TurnFailed("the answer was never heard")
            await asyncio.sleep(0.02)
        return sound

    async def turn(self, question: Speech) -> dict[str, Any]:
        """One question and the start of its answer, timed (see the module's docstring)."""
        from app.service import events as ev
        from app.service.voice.dictation_events import DictationFinished
        from app.service.voice.voice_mode_events import VoiceModeState
        await self.listening()
        played = time.monotonic()
        player = self.play(question)
        try:
            sent = await self.heard_and_sent(played)
            sound = await self.first_sound(sent)
            await asyncio.sleep(HEAR_AFTER_SOUND_S)
            stopped = time.monotonic()
            self.doors.read_aloud.stop()  # as Esc: voice mode stops the answer and listens again
            await self.log.until(is_state(VoiceModeState.LISTENING), stopped, 30, "listening after the answer")
        finally:
            player.wait(30)
        speech_end = self.room.last_loud(played, sent, question.loud)
        said = self.probes.first("said", sent)
        finished = self.log.first(lambda e: isinstance(e, DictationFinished), played)
        transcribed = self.probes.last("transcribed", played, finished[0]) if finished is not None else None
        started = self.log.first(lambda e: isinstance(e, ev.AnswerStarted), sent)
        grew = self.log.first(lambda e: isinstance(e, ev.TextGrew) and not e.thinking and bool(e.delta), sent)
        if speech_end is None or said is None or transcribed is None or finished is None \
                or started is None or grew is None:
            raise TurnFailed("an event of the turn is missing")
        parts = {"silence": transcribed[0] - speech_end, "words": finished[0] - transcribed[0], "sent": sent - finished[0],
                 "first token": grew[0] - sent, "first clause": said[0] - grew[0], "voice": sound - said[0]}
        return {"question": question.said, "heard": finished[1].text, "first_piece": said[1],
                "total_s": round(sound - speech_end, 3), "parts_s": {k: round(v, 3) for k, v in parts.items()},
                "transcribe_s": round(transcribed[1], 3), "answer_started_s": round(started[0] - sent, 3)}

    async def barge_in(self, question: Speech, person: Speech, speaks_for: float) -> dict[str, Any]:
        """One try: the voice silenced by the person's speech over it (see the module's docstring)."""
        from app.service.voice.dictation_events import DictationState
        from app.service.voice.voice_mode_events import VoiceModeState
        await self.listening()
        played = time.monotonic()
        player = self.play(question)
        try:
            sent = await self.heard_and_sent(played)
            sound = await self.first_sound(sent)
        finally:
            player.wait(30)
        await asyncio.sleep(max(0.0, sound + speaks_for - time.monotonic()))
        if self.doors.voice_mode.state is not VoiceModeState.SPEAKING:
            raise TurnFailed(f"the answer was over before the person spoke ({self.doors.voice_mode.state})")
        over = time.monotonic()
        interrupter = self.play(person)
        try:
            await self.log.until(is_state(VoiceModeState.LISTENING), over, 10, "the interruption")
            await asyncio.sleep(1.0)  # the voice's last sound reaches the monitor meanwhile
            window = time.monotonic()
            self.doors.voice_mode.stop()  # its words dropped: no next answer to hear
        finally:
            interrupter.wait(30)
        if self.doors.voice.state is not DictationState.IDLE:
            await self.log.until(dictation_is(DictationState.IDLE), window, 30, "the microphone closed")
        onset = self.room.first_loud(over, person.loud, window)
        detected = self.probes.first("speech_started", over)
        stopped = self.probes.first("sound_stopped", over)
        if onset is None or detected is None or stopped is None:
            raise TurnFailed("the person's speech, its detection or the voice's stop is missing")
        last_sound = self.speaker.last_loud(onset, window, SPEAKER_LOUD)
        if last_sound is not None and last_sound > window - 0.3:
            raise TurnFailed("the voice was still speaking a second after the interruption")
        playing = self.speaker.last_loud(onset - 0.25, onset, SPEAKER_LOUD) is not None
        # Silent for sure once the stream is being stopped and its last sound has come out (whatever it played
        # meanwhile is in the samples): a pause between two words before the stop is not counted as silence.
        silent = max(stopped[0], last_sound if last_sound is not None else onset)
        return {"speaks_for_s": speaks_for, "playing_at_onset": playing,
                "silenced_ms": round((silent - onset) * 1000, 1),
                "last_sound_ms": round(((last_sound or onset) - onset) * 1000, 1),
                "stop_call_ms": round(stopped[1] * 1000, 1),
                "parts_ms": {"detector": round((detected[0] - onset) * 1000, 1),
                             "stop": round((stopped[0] - detected[0]) * 1000, 1),
                             "last sound": round((silent - stopped[0]) * 1000, 1)}}


# --- figures ----------------------------------------------------------------------------------------------


def spread(values: list[float], digits: int = 3) -> dict[str, float]:
    """Median, p95 (inclusive quantiles; the one value for one) and max."""
    p95 = statistics.quantiles(values, n=20, method="inclusive")[18] if len(values) > 1 else values[0]
    return {"median": round(statistics.median(values), digits), "p95": round(p95, digits),
            "max": round(max(values), digits)}


def voice_to_voice_summary(rows: list[dict[str, Any]], failed: list[str], first: dict[str, Any] | None,
                           speech: str) -> dict[str, Any]:
    if not rows:
        return {"skipped": f"no turn went through: {failed}"}
    parts = {name: spread([row["parts_s"][name] for row in rows]) for name in rows[0]["parts_s"]}
    total = spread([row["total_s"] for row in rows])
    return {"speech": speech, "turns": len(rows), "failed": failed, "total_s": total, "parts_s": parts,
            "transcribe_s": spread([row["transcribe_s"] for row in rows]), "first_turn": first,
            "goal_met": total["median"] <= VOICE_TO_VOICE_GOAL_S, "rows": rows}


def barge_in_summary(rows: list[dict[str, Any]], failed: list[str]) -> dict[str, Any]:
    counted = [row for row in rows if row["playing_at_onset"]]
    if not counted:
        return {"skipped": f"no try with the voice sounding as the person spoke: {failed}", "rows": rows}
    silenced = spread([row["silenced_ms"] for row in counted], 1)
    parts = {name: spread([row["parts_ms"][name] for row in counted], 1) for name in counted[0]["parts_ms"]}
    return {"person": "real recording (beckett.wav: \"Ever tried.\")", "tries": len(counted),
            "left_out": len(rows) - len(counted), "failed": failed, "silenced_ms": silenced, "parts_ms": parts,
            "goal_met": silenced["median"] <= BARGE_IN_GOAL_MS, "rows": rows}


# --- the service ------------------------------------------------------------------------------------------


def prepare_home(model: Path | None) -> tuple[str, Path]:
    """This run's Kestrel home (KESTREL_HOME): the model (given, or the starter assembled from its packages),
    the speech models copied in, the settings; the model's id and the speech folder."""
    from app.core.paths import data_paths
    from app.core.settings import Settings, SettingsFile
    from app.core.voice_settings import VoiceSettings
    from app.library.importer import import_model_file
    from app.library.models import ModelLibrary
    from app.library.starter import install_starter
    from app.voice.speech_models import WHISPER_TINY_EN, ensure_speech_model
    from app.voice.synthesis.voices import JOE, ENGLISH_G2P, ensure_bundle
    paths = data_paths().ensure()
    library = ModelLibrary(paths.models)
    installed = import_model_file(library, model) if model is not None else install_starter(library)
    speech = paths.data / "speech"
    speech.mkdir(exist_ok=True)
    ensure_speech_model(WHISPER_TINY_EN, speech)
    ensure_bundle(JOE.bundle, speech)
    ensure_bundle(ENGLISH_G2P, speech)
    voice = VoiceSettings(microphone="pulse", speaker="pulse", interrupt_by_speaking=False)
    SettingsFile(paths.settings_file).save(Settings(default_model=installed.id, voice=voice))
    return installed.id, speech


async def voice_to_voice(room: VoiceRoom, questions: list[Speech], turns: int, speech: str) -> dict[str, Any]:
    if not turns:
        return {"skipped": "--turns 0"}
    rows: list[dict[str, Any]] = []
    failed: list[str] = []
    first: dict[str, Any] | None = None
    room.doors.voice_mode.start()
    for n in range(turns + 1):  # the first is the warm-up
        try:
            row = await room.turn(questions[n % len(questions)])
        except TurnFailed as failure:
            failed.append(f"turn {n}: {failure}")
            print(f"  turn {n}: {failure}", flush=True)
            room.doors.read_aloud.stop()  # an answer still being said would hold up the next turn
        else:
            print(f"  turn {n}: {row['total_s']:.2f} s, heard {row['heard']!r}, first piece {row['first_piece']!r}",
                  flush=True)
            if n == 0:
                first = row
            else:
                rows.append(row)
    room.doors.voice_mode.stop()
    return voice_to_voice_summary(rows, failed, first, speech)


async def barge_in_tries(room: VoiceRoom, question: Speech, person: Speech, barge_ins: int) -> dict[str, Any]:
    if not barge_ins:
        return {"skipped": "--barge-ins 0"}
    doors = room.doors
    settings = doors.settings.settings
    await doors.settings.update_settings(dataclasses.replace(
        settings, voice=dataclasses.replace(settings.voice, interrupt_by_speaking=True)))
    rows: list[dict[str, Any]] = []
    failed: list[str] = []
    for n in range(barge_ins * 2):
        if sum(1 for row in rows if row["playing_at_onset"]) >= barge_ins:
            break
        doors.voice_mode.start()
        try:
            row = await room.barge_in(question, person, BARGE_IN_AFTER_S[n % len(BARGE_IN_AFTER_S)])
        except TurnFailed as failure:
            failed.append(f"try {n}: {failure}")
            print(f"  barge-in {n}: {failure}", flush=True)
            doors.voice_mode.stop()
        else:
            rows.append(row)
            print(f"  barge-in {n}: silent {row['silenced_ms']:.0f} ms after the onset "
                  f"(sounding then: {row['playing_at_onset']})", flush=True)
        await asyncio.sleep(1.0)
    return barge_in_summary(rows, failed)


async def with_service(args: Any, address: str, questions: list[Speech], speech: str, long_question: Speech,
                       person: Speech) -> tuple[dict[str, Any], dict[str, Any]]:
    from app.core.paths import data_paths
    from app.library.models import ModelLibrary
    from app.service.doors.window import WindowDoors
    from app.service.models.background import WindowState
    from app.service.models.client import EngineClient
    from app.service.root import Service
    paths = data_paths().ensure()
    service = Service(history_path=paths.history_db, settings_path=paths.settings_file,
                      library=ModelLibrary(paths.models), client=EngineClient())
    doors = WindowDoors.of(service)
    log, probes = Log(), Probes()
    for subscribe in (doors.subscribe, doors.voice_mode.subscribe, doors.voice.subscribe, doors.read_aloud.subscribe):
        subscribe(log.hear)
    room = VoiceRoom(doors, address, probes, log)
    try:
        with probes.installed():
            await service.start_up()
            doors.set_window_state(WindowState.FOREGROUND)
            turns = await voice_to_voice(room, questions, args.turns, speech)
            return turns, await barge_in_tries(room, long_question, person, args.barge_ins)
    finally:
        room.close()
        await service.shutdown()


def measure(args: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Voice to voice and barge-in as the JSON holds them; each says why where it was not measured."""
    if missing := missing_tools():
        why = f"{', '.join(missing)} not installed (apt-get install pulseaudio pulseaudio-utils)"
        return {"skipped": why}, {"skipped": why}
    with tempfile.TemporaryDirectory(prefix="kestrel-voice-turns-") as folder:
        work = Path(folder)
        os.environ["KESTREL_HOME"] = str(work / "home")
        model_id, speech_folder = prepare_home(args.model)
        print(f"voice mode on {model_id}: {args.turns} turns (+1 warm-up), {args.barge_ins} barge-ins", flush=True)
        person = beckett_first(work)
        said = synthetic(work, speech_folder, (*QUESTIONS, LONG_QUESTION))
        questions, speech = (([person], "real recording (beckett.wav: \"Ever tried.\")") if args.speech == "beckett"
                             else (said[:-1], "synthetic: Kestrel's own Piper voice"))
        with private_pulse(work / "pulse") as address:
            os.environ["PULSE_SERVER"] = address  # before PortAudio first opens a stream
            turns, barge_in = asyncio.run(with_service(args, address, questions, speech, said[-1], person))
    for report in (turns, barge_in):
        report["model"] = model_id
    return turns, barge_in
