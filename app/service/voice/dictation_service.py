"""Dictation's owner: one dictation at a time from the person's press, its events on the loop, the transcriber kept between them.

Policy: the microphone opens only in start() (a press) and closes at stop(), at the end of speech when the
setting says so, or when the device goes; nothing here waits on audio on the loop: opening (PortAudio,
the detector's model, the speech model's first copy), closing and transcribing run on threads, and the
pipeline's events come back through call_soon_threadsafe. The transcription child outlives a dictation
(a second press does not load the model again) and ends in close(), at shutdown.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.core.voice_settings import VoiceSettings
from app.service.voice.dictation_events import (DictationAvailability, DictationEvent, DictationFinished,
                                                DictationHeard, DictationNotHeard, DictationSpeechStarted,
                                                DictationState, DictationStateChanged, VoiceMissing)
from app.voice.devices import DeviceUnavailable, list_audio_devices
from app.voice.catalog.choice import dictation_model
from app.voice.speech_models import (SpeechModel, SpeechModelError, ensure_speech_model, installed_folder,
                                     not_installed_words, shipped)

if TYPE_CHECKING:  # numpy comes with these: imported at the first press, not when the service starts
    from app.voice.dictation import DictationEvent as PipelineEvent
    from app.voice.dictation import DictationPipeline
    from app.voice.microphone import Level, MicrophoneSession
    from app.voice.transcriber import Transcriber

# What dictation needs installed (the `voice` extra): recognition, the microphone, the detector.
VOICE_PACKAGES = ("faster_whisper", "sounddevice", "onnxruntime")
# A person who talks without a pause still sees words after this long (the utterance is sent in parts).
LONGEST_PART_S = 10.0
# Voice mode's turn ends this long after the person's last word (the detector's own hang-over is 500 ms): a pause
# between two sentences does not send the first alone (and the second would then interrupt the answer). An
# utterance Whisper heard as a question ends the turn at once (DictationSettings.question_ends).
TURN_QUIET_MS = 1_000
# How long shutdown waits for a dictation to end (its last words transcribed) before it leaves it.
CLOSE_WAIT_S = 10.0
Listener = Callable[[DictationEvent], None]
Spawn = Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]]


class _Unavailable(Exception):
    def __init__(self, availability: DictationAvailability) -> None:
        super().__init__(availability.missing, availability.detail)
        self.availability = availability


class Dictation:
    """The window's dictation: start(), stop() or toggle(); hear its events with subscribe(); `level` is the
    open microphone's loudness now (None while it is closed); `availability` is what check() last found."""

    def __init__(self, settings: Callable[[], VoiceSettings], speech_folder: Path, spawn: Spawn,
                 model: SpeechModel | None = None) -> None:
        self._settings = settings
        self._speech_folder = speech_folder
        self._spawn = spawn
        self._given_model = model  # None: the settings' language chooses (dictation_model)
        self._listeners: list[Listener] = []
        self._transcriber: Transcriber | None = None
        self._pipeline: DictationPipeline | None = None
        self._microphone: MicrophoneSession | None = None
        self._task: asyncio.Task[Any] | None = None
        self._stop_asked = False
        self._heard: list[str] = []
        self._for_voice_mode = False
        self.state = DictationState.IDLE
        self.availability: DictationAvailability | None = None

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call listener (on the loop) with every dictation event from now on; returns what unsubscribes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    @property
    def level(self) -> Level | None:
        microphone = self._microphone
        return microphone.level if microphone is not None and self.state is DictationState.LISTENING else None

    async def check(self) -> DictationAvailability:
        """Whether dictation can start here (looked up on a thread: it reads the disk)."""
        self.availability = await asyncio.to_thread(self._availability_now, None)
        return self.availability

    async def microphones(self) -> tuple[str, ...]:
        """The names of the microphones the sound system offers now (read on a thread; none when it has
        no sound library)."""
        try:
            devices = await asyncio.to_thread(list_audio_devices)
        except DeviceUnavailable:
            return ()
        return tuple(dict.fromkeys(device.name for device in devices.inputs))

    def toggle(self) -> None:
        """The mic button and its shortcut: start when idle, stop otherwise."""
        if self.state is DictationState.IDLE:
            self.start()
        else:
            self.stop()

    def start(self, *, for_voice_mode: bool = False) -> bool:
        """Open the microphone and listen (the work on threads; returns at once); False if a dictation is on.

        for_voice_mode: voice mode listens for one utterance, whatever "stop at the end of speech" says, and
        its DictationFinished says so (its words are voice mode's to send, not the message box's)."""
        if self.state is not DictationState.IDLE:
            return False
        self._stop_asked = False
        self._heard = []
        self._for_voice_mode = for_voice_mode
        self._set(DictationState.OPENING)
        settings = self._settings()
        if for_voice_mode:
            settings = dataclasses.replace(settings, stop_at_end_of_speech=True)
        self._task = self._spawn(self._dictate(settings, TURN_QUIET_MS if for_voice_mode else 0))
        return True

    @property
    def for_voice_mode(self) -> bool:
        """The dictation on now (or the last one) was started by voice mode."""
        return self._for_voice_mode

    def stop(self) -> None:
        """Close the microphone; the words already spoken are still transcribed, then DictationFinished."""
        self._stop_asked = True
        pipeline = self._pipeline
        if self.state is DictationState.LISTENING and pipeline is not None:
            self._set(DictationState.FINISHING)
            self._spawn(asyncio.to_thread(pipeline.stop))  # closing a stream may wait on the driver

    async def release(self, model_id: str) -> bool:
        """Let go of a speech model about to be removed: its transcription child ends (Windows will not delete a
        file a process holds open). False while a dictation listens with it: it is in use."""
        transcriber = self._transcriber
        if transcriber is None or transcriber.model.id != model_id:
            return True
        if self._task is not None and not self._task.done():
            return False
        self._transcriber = None
        await asyncio.to_thread(transcriber.close)
        return True

    async def close(self) -> None:
        """At shutdown: end a dictation (bounded), then the transcription child."""
        task = self._task
        if task is not None and not task.done():
            self.stop()
            try:
                await asyncio.wait_for(asyncio.shield(task), CLOSE_WAIT_S)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pipeline = self._pipeline
                if pipeline is not None:
                    await asyncio.to_thread(pipeline.stop)
        if self._transcriber is not None:
            await asyncio.to_thread(self._transcriber.close)

    async def _dictate(self, settings: VoiceSettings, quiet_ms: int) -> None:
        from app.voice.dictation import DictationEnded
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[PipelineEvent] = asyncio.Queue()

        def from_worker(event: PipelineEvent) -> None:
            try:
                loop.call_soon_threadsafe(events.put_nowait, event)
            except RuntimeError:  # the loop closed at exit: nobody is left to tell
                pass

        try:
            pipeline, microphone = await asyncio.to_thread(self._opened, settings, quiet_ms, from_worker)
        except DeviceUnavailable as refused:
            self._finish(DictationFinished("", problem=refused.problem, detail=refused.detail))
            return
        except _Unavailable as unavailable:
            self._finish(DictationFinished("", missing=unavailable.availability.missing,
                                           detail=unavailable.availability.detail))
            return
        except Exception as exc:  # a bug: the button is made ready again and the fault said, then it is raised
            self._finish(DictationFinished("", error=f"{type(exc).__name__}: {exc}"))
            raise
        self._pipeline, self._microphone = pipeline, microphone
        self._set(DictationState.LISTENING, microphone.device_used)
        if self._stop_asked:  # pressed again while the microphone was opening
            self.stop()
        transcriber = self._transcriber
        if transcriber is not None and transcriber.pid is None:
            self._spawn(asyncio.to_thread(_warm_up, transcriber))
        while not isinstance(event := await events.get(), DictationEnded):
            self._hear(event)
        self._pipeline = self._microphone = None
        error = event.detail if event.problem is None and event.detail else ""
        self._finish(DictationFinished(event.text, problem=event.problem, detail=event.detail if not error else "",
                                       error=error, send_at_once=self._settings().send_at_once))

    def _finish(self, finished: DictationFinished) -> None:
        if self._for_voice_mode:
            finished = dataclasses.replace(finished, voice_mode=True, send_at_once=False)
        self._set(DictationState.IDLE)
        self._emit(finished)

    def _opened(self, settings: VoiceSettings, quiet_ms: int,
                on_event: Callable[[PipelineEvent], None]) -> tuple[DictationPipeline, MicrophoneSession]:
        """On a thread: what dictation needs, checked and loaded, and the microphone opened."""
        from app.voice.dictation import DictationPipeline, DictationSettings
        from app.voice.microphone import MicrophoneSession
        from app.voice.transcriber import Transcriber
        from app.voice.vad import VoiceActivity
        model, language = dictation_model(settings.language, self._given_model, settings.speech_model)
        availability = self.availability = self._availability_now(model)
        if not availability.ready:
            raise _Unavailable(availability)
        try:
            self._speech_folder.mkdir(parents=True, exist_ok=True)
            ensure_speech_model(model, self._speech_folder)  # copied and checked the first time
        except (SpeechModelError, OSError) as exc:
            raise _Unavailable(DictationAvailability(VoiceMissing.SPEECH_MODEL, str(exc))) from exc
        try:
            detector = VoiceActivity()
        except SpeechModelError as exc:
            raise _Unavailable(DictationAvailability(VoiceMissing.SPEECH_MODEL, str(exc))) from exc
        except (ImportError, OSError) as exc:  # ONNX Runtime there but broken (its native library)
            raise _Unavailable(DictationAvailability(VoiceMissing.VOICE_PACKAGES, str(exc))) from exc
        if self._transcriber is not None and self._transcriber.model != model:  # the language setting changed
            self._transcriber.close()
            self._transcriber = None
        if self._transcriber is None:
            self._transcriber = Transcriber(model, self._speech_folder)
        # Read again at each press: a microphone plugged in (or the sound server restarted) since the last one
        # is found, and a list left from before would open a device that is no longer there.
        list_audio_devices(refresh=True)
        microphone = MicrophoneSession(settings.microphone)
        pipeline = DictationPipeline(microphone, self._transcriber, detector, on_event,
                                     DictationSettings(one_utterance=settings.stop_at_end_of_speech,
                                                       max_utterance_s=LONGEST_PART_S, language=language,
                                                       quiet_ms=quiet_ms, question_ends=quiet_ms > 0))
        pipeline.start()
        return pipeline, microphone

    def _availability_now(self, model: SpeechModel | None = None) -> DictationAvailability:
        """Whether dictation can start with `model` (by default the one the settings' language takes)."""
        for package in VOICE_PACKAGES:
            if importlib.util.find_spec(package) is None:
                return DictationAvailability(VoiceMissing.VOICE_PACKAGES, package)
        if model is None:
            settings = self._settings()
            model, _ = dictation_model(settings.language, self._given_model, settings.speech_model)
        if installed_folder(model, self._speech_folder) is None and not shipped(model):
            return DictationAvailability(VoiceMissing.SPEECH_MODEL, not_installed_words(model))
        return DictationAvailability()

    def _hear(self, event: PipelineEvent) -> None:
        from app.voice.dictation import Heard, NotHeard
        from app.voice.vad import SpeechStarted
        if isinstance(event, SpeechStarted):
            self._emit(DictationSpeechStarted())
        elif isinstance(event, Heard):
            self._heard.append(event.text)
            self._emit(DictationHeard(" ".join(self._heard), event.text))
        elif isinstance(event, NotHeard):
            self._emit(DictationNotHeard(event.failure.kind, event.failure.detail))

    def _set(self, state: DictationState, device: str = "") -> None:
        self.state = state
        self._emit(DictationStateChanged(state, device))

    def _emit(self, event: DictationEvent) -> None:
        for listener in list(self._listeners):
            listener(event)


def _warm_up(transcriber: Transcriber) -> None:
    """Start the transcription child while the person speaks (half a second of silence asks it to load), so
    the first words come without the model's load."""
    import numpy as np

    from app.voice.audio import AudioKind, AudioRefused
    from app.voice.protocol import TranscribeAsk
    from app.voice.transcriber import TranscriptionFailed
    try:
        transcriber.transcribe(TranscribeAsk(np.zeros(8_000, "<i2").tobytes(), AudioKind.PCM16, None))
    except (AudioRefused, TranscriptionFailed, SpeechModelError):
        pass  # the dictation's own transcription says what went wrong
