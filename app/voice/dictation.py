"""Dictation: microphone blocks → voice activity → at each end of speech, that utterance's PCM → the transcriber → text.

A worker thread of its own reads the microphone, so neither the UI thread nor PortAudio's audio thread
ever waits on the detector or the transcriber (blocks queue in the session meanwhile). An utterance's
audio lives in memory only: it goes to the transcription child over its pipe as raw PCM and is dropped;
nothing is written to disk. Events go to on_event from the worker thread; a front end hands them to its
own thread (the window's bridge, a queue).

Early words: the detector ends speech only after half a second of silence (a pause between two words must
not end it). Once EARLY_MS of that silence has passed, the utterance so far is transcribed while the rest of
the hang-over is still being listened to: if the speech ends there, its text is already known (the same
samples: up to the last word and after_ms past it), and Whisper's time no longer follows the hang-over; if
the person goes on, that text is dropped unseen. Voice mode's turn ends there and then when the early words
are a question.

While Kestrel's voice plays, speech the detector hears is held until the echo check (app/voice/echo.py)
says whose it is: Kestrel's own voice through the room is dropped (neither told nor transcribed), and
the person's is told as usual. An echo is checked again block by block, so a person who starts speaking
over it is heard once their voice is what the microphone mostly hears.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.voice.audio import SAMPLE_RATE, AudioKind, AudioRefused
from app.voice.devices import DeviceProblem
from app.voice.echo import SPOKEN, WINDOW_S, EchoCheck, SpokenSound, Whose
from app.voice.microphone import MicrophoneEnded, MicrophoneSession
from app.voice.protocol import TranscribeAsk
from app.voice.speech_models import SpeechModelError
from app.voice.transcriber import FailureKind, Transcriber, TranscriptionFailed
from app.voice.vad import WINDOW, SpeechEnded, SpeechStarted, VoiceActivity

# How many blocks (32 ms each) speech heard over Kestrel's voice may be held while the echo check is unsure;
# then it counts as the echo (checked on, block by block): a voice taken for the person's would stop the
# answer and be sent back as the next message, a person taken for the voice has only to go on speaking.
HOLD_BLOCKS = 4
# Blocks in a row that must sound like the person before an echo becomes the person's speech; or, once the
# speech has sounded like the voice, that must not (unsure included: the person over the voice, only a few dB
# louder than it, was unsure for 1.9 s through PulseAudio, while the voice alone is 0.9-1.0 there and 0.5 or
# more in made-up rooms; but the voice's first syllable, before it had sounded like itself, was unsure too).
PERSON_BLOCKS = 2
DOUBT_BLOCKS = 6
# How much of the microphone is kept while the voice is heard, for the person's first words (the check's
# window is 0.4 s: their start comes before the doubt does).
_DOUBT_KEPT_S = 3.0
# Silence after the last word (within the detector's 500 ms hang-over) after which the utterance is transcribed
# early. Shorter would transcribe more pauses between words for nothing (each costs a Whisper run); longer would
# leave Whisper's time (0.1-0.4 s here) past the hang-over again.
EARLY_MS = 200


@dataclass(frozen=True)
class DictationSettings:
    """max_utterance_s: speech longer than this is sent in parts (a person who never pauses still sees
    words); pre_roll_ms: audio kept from before the detector said "speech" (it needs a window or two to
    be sure, and the first consonant is in them); after_ms: audio kept past the end of speech;
    one_utterance: end after the first utterance (dictation's "stop at the end of speech"); quiet_ms: with
    one_utterance, end only once this long has passed since the last word (0: as soon as the detector says
    speech ended), so that a person who pauses between two sentences is not cut off (voice mode's turns);
    question_ends: with quiet_ms, an utterance the transcriber heard as a question ("…?") ends it without that
    wait (a question is a whole turn; a statement may go on after a pause), as soon as its early words are
    heard; early_ms: silence after which the utterance is transcribed early (0: only at the end of speech)."""

    max_utterance_s: float = 30.0
    pre_roll_ms: int = 300
    after_ms: int = 200
    one_utterance: bool = False
    language: str | None = None
    quiet_ms: int = 0
    question_ends: bool = False
    early_ms: int = EARLY_MS


@dataclass(frozen=True)
class _Early:
    """An utterance transcribed early: its samples' span, and its text (None: too short to hold a word)."""

    start: int
    until: int
    text: str | None


@dataclass(frozen=True)
class Heard:
    """One utterance's text, its times in seconds from the start of the recording; cut: it reached the
    longest utterance and the speech goes on in the next."""

    text: str
    start: float
    end: float
    cut: bool = False


@dataclass(frozen=True)
class NotHeard:
    """An utterance the transcriber could not turn into text (the failure, for the front end's words)."""

    failure: TranscriptionFailed
    start: float
    end: float


@dataclass(frozen=True)
class DictationEnded:
    """Dictation is over: problem None when stopped (or after its one utterance), else why the microphone
    ended; heard holds every utterance's text, including the one open when it ended; detail: the device's
    words, or the error of a bug that ended it."""

    problem: DeviceProblem | None
    detail: str
    heard: tuple[Heard, ...]

    @property
    def text(self) -> str:
        return " ".join(part.text for part in self.heard if part.text)


DictationEvent = SpeechStarted | Heard | NotHeard | DictationEnded


def _question(text: str) -> bool:
    """Whether Whisper heard the words as a question (it writes the "?" from the voice's rise)."""
    return text.rstrip().endswith("?")


class DictationPipeline:
    """Owns one microphone session for its length: start(), events as speech comes, stop() or the end."""

    def __init__(self, microphone: MicrophoneSession, transcriber: Transcriber, voice_activity: VoiceActivity,
                 on_event: Callable[[DictationEvent], None], settings: DictationSettings = DictationSettings(),
                 spoken: SpokenSound | None = SPOKEN) -> None:
        self._microphone = microphone
        self._spoken = spoken  # what Kestrel played (None: no echo check)
        self._echo: EchoCheck | None = None
        self._held: SpeechStarted | None = None  # speech heard while Kestrel spoke, not yet judged
        self._held_blocks = 0
        self._echoing = False  # the detector's speech is Kestrel's own voice
        self._person_blocks = 0
        self._doubt_blocks = 0
        self._doubt_from = 0  # the sample where the blocks not sounding like the voice began
        self._person_from = 0  # the sample where the blocks sounding like the person began
        self._voice_seen = False  # this speech has sounded like the voice at least once
        self._transcriber = transcriber
        self._vad = voice_activity
        self._on_event = on_event
        self._settings = settings
        self._audio = np.zeros(0, dtype=np.int16)  # recent samples; _audio[0] is sample number _audio_from
        self._audio_from = 0
        self._fed = 0
        self._utterance_from: int | None = None  # sample where the open utterance's audio starts
        self._last_word = 0  # sample where the last utterance's speech ended
        self._heard: list[Heard] = []
        self._early: _Early | None = None  # the open utterance transcribed at its latest pause
        self._stop_asked = False
        self._worker: threading.Thread | None = None
        self._ended = threading.Event()
        self.result: DictationEnded | None = None

    def start(self) -> None:
        """Open the microphone (DeviceUnavailable if it cannot) and start listening."""
        self._microphone.start()
        self._worker = threading.Thread(target=self._run, name="kestrel-dictation", daemon=True)
        self._worker.start()

    def stop(self) -> None:
        """Stop listening; speech already heard is still transcribed, and DictationEnded follows."""
        self._stop_asked = True
        self._microphone.stop()

    def wait(self, timeout: float) -> DictationEnded | None:
        self._ended.wait(timeout)
        return self.result

    def _run(self) -> None:
        end = MicrophoneEnded()
        try:
            end = self._listen()
        except Exception as exc:  # a bug: the end still comes (no front end waits for ever), then it is raised
            end = MicrophoneEnded(None, f"{type(exc).__name__}: {exc}")
            raise
        finally:
            self._close_open_speech()
            self.result = DictationEnded(end.problem, end.detail, tuple(self._heard))
            self._microphone.stop()
            self._ended.set()
            self._on_event(self.result)

    def _listen(self) -> MicrophoneEnded:
        while True:
            got = self._microphone.read(0.1)
            if got is None:
                continue
            if isinstance(got, MicrophoneEnded):
                return got
            self._take(got)
            for event in self._vad.feed(got):
                self._keep(event)
            self._judge_echo()
            if self._too_long():
                self._send(self._fed, cut=True)
                self._utterance_from = self._fed
            asked_early = self._hear_early()
            if self._turn_over(asked_early):
                self._microphone.stop()
                return MicrophoneEnded()

    def _turn_over(self, asked_early: bool) -> bool:
        """With one_utterance: its speech has ended and the quiet after it (or a question) says the turn is over."""
        settings = self._settings
        if not settings.one_utterance or not self._heard or self._utterance_from is not None:
            return False
        if asked_early:
            return True
        asked = settings.question_ends and _question(self._heard[-1].text)
        return not self._vad.speaking and (asked or self._fed - self._last_word >= settings.quiet_ms * SAMPLE_RATE // 1000)

    def _hear_early(self) -> bool:
        """The open utterance transcribed once early_ms of silence follows its last word (once a pause); True when
        that ended voice mode's turn: a question, sent as the utterance's text without the rest of the hang-over."""
        settings, quiet = self._settings, self._vad.quiet_since
        start = self._utterance_from
        if not settings.early_ms or quiet is None or start is None or self._held is not None or self._echoing:
            return False
        last_word = round(quiet * SAMPLE_RATE)
        if self._fed - last_word < settings.early_ms * SAMPLE_RATE // 1000:
            return False
        until = min(last_word + settings.after_ms * SAMPLE_RATE // 1000, self._fed)
        if self._early is not None and (self._early.start, self._early.until) == (start, until):
            return False  # this pause's words are known already
        pcm = self._audio[max(0, start - self._audio_from):max(0, until - self._audio_from)]
        try:
            text: str | None = self._words(pcm)
        except AudioRefused:
            text = None
        except (TranscriptionFailed, SpeechModelError):
            return False  # said at the end of speech, when it is tried again
        self._early = _Early(start, until, text)
        if not (settings.one_utterance and settings.question_ends and text and _question(text)):
            return False
        self._last_word = last_word
        self._send(until, cut=False)  # the text just heard (the utterance ends; the detector's end will find none open)
        self._utterance_from = None
        return True

    def _words(self, pcm: npt.NDArray[np.int16]) -> str:
        """What the transcriber hears in pcm (its errors raised as they come)."""
        ask = TranscribeAsk(pcm.astype("<i2").tobytes(), AudioKind.PCM16, self._settings.language)
        return self._transcriber.transcribe(ask).text.strip()

    def _take(self, block: npt.NDArray[np.int16]) -> None:
        self._audio = np.concatenate([self._audio, block])
        self._fed += block.size
        if self._utterance_from is None:  # between utterances only the pre-roll is worth keeping
            # (the detector may still hold up to a window of this block, where speech may start)
            keep = self._settings.pre_roll_ms * SAMPLE_RATE // 1000 + block.size + WINDOW
            if self._echoing:  # the person's words may have begun while the check was still in doubt
                keep += round(_DOUBT_KEPT_S * SAMPLE_RATE)
            if self._audio.size > keep:
                self._audio_from += self._audio.size - keep
                self._audio = self._audio[-keep:]

    def _keep(self, event: SpeechStarted | SpeechEnded) -> None:
        if isinstance(event, SpeechStarted):
            pre_roll = self._settings.pre_roll_ms * SAMPLE_RATE // 1000
            self._utterance_from = max(self._audio_from, round(event.at * SAMPLE_RATE) - pre_roll)
            if not self._voice_near():
                self._on_event(event)
            else:  # judged by _judge_echo, on this block first
                self._held, self._held_blocks, self._person_blocks, self._doubt_blocks = event, 0, 0, 0
                self._voice_seen = False
            return
        if self._echoing or (self._held is not None and self._whose() in (Whose.ECHO, Whose.UNSURE)):
            self._held, self._echoing = None, False  # Kestrel's voice: nothing to tell, nothing to transcribe
            self._utterance_from = None
            return
        if self._held is not None:
            held, self._held = self._held, None
            self._on_event(held)
        self._last_word = round(event.at * SAMPLE_RATE)
        if self._utterance_from is not None:
            # The detector ends speech a hang-over after its last word, so these samples are already here.
            until = self._last_word + self._settings.after_ms * SAMPLE_RATE // 1000
            self._send(until, cut=False)
            self._utterance_from = None

    def _check(self) -> EchoCheck | None:
        if self._spoken is not None and self._echo is None:
            self._echo = EchoCheck(self._spoken, self._microphone.heard_at)
        return self._echo

    def _voice_near(self) -> bool:
        check = self._check()
        return check is not None and check.voice_near(self._fed)

    def _whose(self) -> Whose:
        """Whose voice the microphone's latest samples are: nothing played (no echo possible), Kestrel's, the person's."""
        check = self._check()
        return Whose.NOTHING_PLAYED if check is None else check.heard(self._audio, self._fed)

    def _judge_echo(self) -> None:
        """After each block: held speech is judged, an echo checked again for the person's voice. The person
        is said only on speech (the detector's last window voiced, not its hang-over: a pause of Kestrel's,
        where the microphone hears only the room, sounds like nothing played) that sounds like the person
        PERSON_BLOCKS blocks in a row, or not like the voice DOUBT_BLOCKS in a row; their words are taken
        from a little before the doubt began."""
        if self._held is None and not (self._echoing and self._vad.speaking):
            return
        voiced = self._vad.voiced
        if self._held is None and not voiced:  # the voice's pause: nothing to count, no check to pay for
            self._person_blocks = self._doubt_blocks = 0
            return
        whose = self._whose()
        half_window = round(WINDOW_S * SAMPLE_RATE) // 2  # a voice begins about here in the window it changes
        if whose in (Whose.PERSON, Whose.NOTHING_PLAYED) and voiced:
            if self._person_blocks == 0:
                self._person_from = self._fed - half_window
            self._person_blocks += 1
        else:
            self._person_blocks = 0
        self._voice_seen = self._voice_seen or whose is Whose.ECHO
        if whose is not Whose.ECHO and voiced and self._voice_seen:
            if self._doubt_blocks == 0:
                self._doubt_from = self._fed - half_window
            self._doubt_blocks += 1
        else:
            self._doubt_blocks = 0
        said = self._person_blocks >= PERSON_BLOCKS or self._doubt_blocks >= DOUBT_BLOCKS
        if self._held is not None:
            self._held_blocks += 1
            if said or whose is Whose.NOTHING_PLAYED:
                held, self._held = self._held, None
                self._on_event(held)
            elif whose is Whose.ECHO or self._held_blocks >= HOLD_BLOCKS:
                self._become_echo()
        elif said:  # the person speaks over the voice (or after it)
            self._echoing = False
            pre_roll = self._settings.pre_roll_ms * SAMPLE_RATE // 1000
            began = min(self._doubt_from if self._doubt_blocks else self._fed,
                        self._person_from if self._person_blocks else self._fed)
            self._utterance_from = max(self._audio_from, began - pre_roll)
            self._on_event(SpeechStarted(self._utterance_from / SAMPLE_RATE))

    def _become_echo(self) -> None:
        self._held, self._echoing = None, True
        self._utterance_from = None  # only the pre-roll is kept from here on

    def _too_long(self) -> bool:
        start = self._utterance_from
        return start is not None and self._fed - start >= self._settings.max_utterance_s * SAMPLE_RATE

    def _close_open_speech(self) -> None:
        for event in self._vad.finish():
            self._keep(event)

    def _send(self, until: int, *, cut: bool) -> None:
        """The open utterance's audio up to sample until, to the transcriber; its text (or failure) out."""
        start = self._utterance_from
        if start is None:
            return
        first, last = start - self._audio_from, min(until, self._audio_from + self._audio.size) - self._audio_from
        pcm = self._audio[max(0, first):max(0, last)]
        self._audio, self._audio_from = self._audio[max(0, last):], self._audio_from + max(0, last)
        times = (start / SAMPLE_RATE, (start + pcm.size) / SAMPLE_RATE)
        early, self._early = self._early, None
        if early is not None and (early.start, early.until) == (start, start + pcm.size):
            if early.text is None:
                return  # too short to hold a word
            text = early.text
        else:
            try:
                text = self._words(pcm)
            except AudioRefused:
                return  # too short to hold a word (a click the detector let through)
            except TranscriptionFailed as failed:
                self._on_event(NotHeard(failed, *times))
                return
            except SpeechModelError as missing:  # the model went (uninstalled, changed) since dictation started
                self._on_event(NotHeard(TranscriptionFailed(FailureKind.LOAD_FAILED, str(missing)), *times))
                return
        heard = Heard(text, *times, cut=cut)
        if heard.text:
            self._heard.append(heard)
            self._on_event(heard)
