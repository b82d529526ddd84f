"""One answer read aloud, on two threads: sentences made by the synthesizer on one, played on the other.

The maker asks the synthesizer for the text handed to it (a whole answer, or a streamed answer's pieces
as they become complete) and passes each sentence to the player through a queue of one, so the next
sentence is made while this one is heard. stop() silences the sound at once (Playback.stop aborts the
stream) and both threads end at their next look at the stop flag; nothing they held is kept. No audio
touches the disk: sentences go from the child's pipe to PortAudio in memory.
"""

from __future__ import annotations

import importlib.util
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.service.voice.read_aloud_events import ReadAloudProblem
from app.voice.devices import DeviceProblem, DeviceUnavailable
from app.voice.transcriber import FailureKind

if TYPE_CHECKING:  # numpy comes with these: imported on the threads, at the first reading
    from app.voice.playback import Playback
    from app.voice.synthesis.synthesizer import SpokenSentence, Synthesizer
    from app.voice.synthesis.voices import SpeakingVoice

# What speaking needs installed besides the voice's data packages (the `voice` extra).
SPEAKING_PACKAGES = ("onnxruntime", "sounddevice")
# How often a waiting thread looks at the stop flag.
_LOOK_S = 0.05


@dataclass(frozen=True)
class ReadingStarted:
    """The first sentence's sound has started."""


@dataclass(frozen=True)
class ReadingEnded:
    """Everything handed over was said (or the reading was stopped: then nobody listens any more)."""


@dataclass(frozen=True)
class ReadingFailed:
    """The reading could not go on: a problem plus facts."""

    problem: ReadAloudProblem
    device: DeviceProblem | None = None
    failure: FailureKind | None = None
    detail: str = ""
    packages: tuple[str, ...] = ()


ReadingNews = ReadingStarted | ReadingEnded | ReadingFailed


class Reading:
    """Reads one answer: say() hands it text (any number of times), end() says that no more comes,
    stop() silences it now. Its news (ReadingNews) goes to `tell`, from its threads."""

    def __init__(self, message_id: int, synthesizer: Callable[[], Synthesizer], voice: SpeakingVoice | None,
                 speed: float, speaker: str | None, chosen_voice: str | None = None) -> None:
        """voice: the one to read with (a test's); None: chosen_voice's (Settings → Voice), or the default."""
        self.message_id = message_id
        self._synthesizer = synthesizer
        self._voice = voice
        self._chosen_voice = chosen_voice
        self._speed = speed
        self._speaker = speaker
        self._texts: queue.Queue[str | None] = queue.Queue()
        self._sentences: queue.Queue[SpokenSentence | None] = queue.Queue(maxsize=1)
        self._stopped = threading.Event()
        self._playing = threading.Lock()  # a sentence's start and stop() do not cross
        self._playback: Playback | None = None
        self._threads: list[threading.Thread] = []
        self._failed = False

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    @property
    def running(self) -> bool:
        """Whether one of its threads has not ended yet (or they have not started)."""
        return not self._threads or any(thread.is_alive() for thread in self._threads)

    def say(self, text: str) -> None:
        if text.strip():
            self._texts.put(text)

    def end(self) -> None:
        self._texts.put(None)

    def start(self, tell: Callable[[ReadingNews], None]) -> None:
        self._threads = [threading.Thread(target=self._make, args=(tell,), name="kestrel-read-aloud-make", daemon=True),
                         threading.Thread(target=self._play, args=(tell,), name="kestrel-read-aloud-play", daemon=True)]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Silence it now and drop what waits (may wait on the sound driver: call it off the loop)."""
        self._stopped.set()
        self._texts.put(None)
        with self._playing:
            playback = self._playback
        if playback is not None:
            playback.stop()

    def join(self, timeout: float) -> None:
        for thread in self._threads:
            thread.join(timeout)

    # --- the maker's thread -------------------------------------------------------------------

    def _make(self, tell: Callable[[ReadingNews], None]) -> None:
        from app.voice.synthesis.reading import TextRefused
        from app.voice.synthesis.synthesizer import SynthesisFailed
        from app.voice.catalog.choice import choose_voice
        from app.voice.synthesis.voices import VoiceError
        try:
            missing = tuple(name for name in SPEAKING_PACKAGES if importlib.util.find_spec(name) is None)
            if missing:
                self._fail(tell, ReadingFailed(ReadAloudProblem.VOICE_MISSING, packages=missing))
                return
            voice = self._voice or choose_voice(self._chosen_voice)
            synthesizer = self._synthesizer()
            while not self.stopped and (text := self._texts.get()) is not None:
                try:
                    spoken = synthesizer.speak(text, voice, self._speed)
                except TextRefused:
                    continue  # nothing to say in this piece (a line of symbols), or a piece past the limit
                try:
                    for sentence in spoken:
                        if not self._hand(sentence):
                            break
                finally:
                    spoken.close()
        except VoiceError as exc:
            self._fail(tell, ReadingFailed(ReadAloudProblem.VOICE_MISSING, detail=str(exc)))
        except SynthesisFailed as exc:
            self._fail(tell, ReadingFailed(ReadAloudProblem.VOICE_FAILED, failure=exc.kind, detail=exc.detail))
        finally:
            self._hand(None)

    def _hand(self, sentence: SpokenSentence | None) -> bool:
        """Give the player a sentence (None: the end), waiting while it plays the one before; False once stopped."""
        while not self.stopped:
            try:
                self._sentences.put(sentence, timeout=_LOOK_S)
                return True
            except queue.Full:
                continue
        return False

    # --- the player's thread ------------------------------------------------------------------

    def _play(self, tell: Callable[[ReadingNews], None]) -> None:
        from app.voice.playback import Playback, PlaybackEnd
        playback = Playback(self._speaker)
        started = False
        while (sentence := self._next()) is not None:
            with self._playing:
                if self.stopped:
                    break
                try:
                    playback.play(sentence.samples, sentence.sample_rate)
                except DeviceUnavailable as refused:
                    self._fail(tell, ReadingFailed(ReadAloudProblem.DEVICE, device=refused.problem,
                                                   detail=refused.detail))
                    break
                self._playback = playback
            if not started:
                started = True
                tell(ReadingStarted())
            ended = None
            while ended is None:
                ended = playback.wait(_LOOK_S)
            if ended.how is PlaybackEnd.DEVICE_LOST:
                self._fail(tell, ReadingFailed(ReadAloudProblem.DEVICE, device=DeviceProblem.DEVICE_LOST))
                break
            if ended.how is PlaybackEnd.STOPPED:
                break
        if not self._failed:
            tell(ReadingEnded())

    def _next(self) -> SpokenSentence | None:
        while not self.stopped:
            try:
                return self._sentences.get(timeout=_LOOK_S)
            except queue.Empty:
                continue
        return None

    def _fail(self, tell: Callable[[ReadingNews], None], failed: ReadingFailed) -> None:
        self._failed = True
        tell(failed)
        self._stopped.set()
