"""Voice mode's owner: a hands-free conversation in the open chat — listen, answer aloud, listen again.

Policy: start() (the voice-mode button or its shortcut) opens the microphone for one utterance (Dictation,
for voice mode); its words go to the open chat as the person's message, as the composer's Send sends them;
the answer is read aloud while it is written (ReadAloud.follow: sentence by sentence, the first one said
as soon as it is complete), and once the voice has said it all the microphone opens again. With
"interrupt by speaking" on (VoiceSettings.interrupt_by_speaking), the microphone stays open while Kestrel
thinks and speaks: the start of the person's speech (the detector's) silences the voice and stops the
answer at once, and what they say is the next message. stop() ends it all: the microphone, the voice
and an answer being written (its text so far kept, as Stop keeps it).

The microphone is open only while voice mode is on, and the window shows it the whole time (the listening
bar). The exchange is an ordinary chat, saved as text; no audio is kept anywhere. When the main window is
hidden, voice mode waits with the microphone closed, unless the person is mid-turn: an utterance being
heard, an answer being written or said goes on to its end (with the engine at full speed: a turn counts as
a window in front, AppWindow.VOICE), then it waits until the window is back. SILENCE_LIMIT_S with nobody
speaking ends it: a microphone is not left open on an empty room.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from app.core.voice_settings import VoiceSettings
from app.service.events import AnswerFinished, AnswerInterrupted, AnswerQueueChanged, AnswerStarted, SendFailed
from app.service.voice.dictation_events import (DictationEvent, DictationFinished, DictationSpeechStarted,
                                                DictationState, DictationStateChanged)
from app.service.voice.dictation_service import Dictation
from app.service.voice.read_aloud import ReadAloud
from app.service.voice.read_aloud_events import ReadAloudEvent, ReadAloudFailed, ReadAloudState, ReadAloudStateChanged
from app.service.voice.voice_mode_events import (VoiceModeChanged, VoiceModeEnd, VoiceModeEnded, VoiceModeEvent,
                                                 VoiceModeState)

# Nobody spoke for this long while voice mode listened: it ends (said), closing the microphone.
SILENCE_LIMIT_S = 300.0
# After an interruption the stopped answer takes a moment to end; the next message waits this long for it.
ANSWER_END_WAIT_S = 5.0
_LOOK_S = 0.05
Listener = Callable[[VoiceModeEvent], None]
Spawn = Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]]
Subscribe = Callable[[Callable[[object], None]], Callable[[], None]]
_TURN = (VoiceModeState.THINKING, VoiceModeState.SPEAKING)


class ChatLine(Protocol):
    """What voice mode needs of the chats (Answering, app/service/chats/answering.py): the composer's Send and
    Stop for the open chat, and whether it is being answered."""

    def send(self, text: str) -> bool: ...
    def stop(self, conversation_id: int | None = None) -> None: ...

    @property
    def open_chat_busy(self) -> bool: ...


class VoiceMode:
    """The window's voice mode: start(), stop() or toggle(); hear its events with subscribe(); `state` is
    where it is now. window_hidden() is told whether the main window is hidden; mid_turn(on) is called when
    a turn starts and ends (the root keeps the engine at full speed meanwhile); open_chat_id() is the chat on
    screen, the one voice mode talks in."""

    def __init__(self, settings: Callable[[], VoiceSettings], dictation: Dictation, read_aloud: ReadAloud,
                 answers: ChatLine, open_chat_id: Callable[[], int | None], subscribe: Subscribe, spawn: Spawn,
                 mid_turn: Callable[[bool], None]) -> None:
        self._settings = settings
        self._dictation = dictation
        self._read_aloud = read_aloud
        self._answers = answers
        self._open_chat_id = open_chat_id
        self._subscribe = subscribe
        self._spawn = spawn
        self._mid_turn = mid_turn
        self._listeners: list[Listener] = []
        self._unsubscribe: list[Callable[[], None]] = []
        self.state = VoiceModeState.OFF
        self._hidden = False  # the main window is hidden
        self._discard = False  # the voice-mode dictation on now was stopped by voice mode: its words are dropped
        self._hearing = False  # the person is speaking (an utterance is open)
        self._asked = False  # a message was sent and its answer has not started
        self._answer_id: int | None = None  # the answer voice mode follows
        self._answer_chat_id: int | None = None  # the chat it is written in
        self._answer_done = False
        self._reading_seen = False  # read-aloud took up the answer (so its going idle means the voice is done)
        self._in_turn = False
        self._silence: asyncio.TimerHandle | None = None

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call listener (on the loop) with every voice-mode event from now on; returns what unsubscribes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def toggle(self) -> None:
        """The voice-mode button and its shortcut: start when off, end otherwise."""
        if self.state is VoiceModeState.OFF:
            self.start()
        else:
            self.stop()

    def start(self) -> bool:
        """Start listening for the person's first message (the work on threads; returns at once); False if on."""
        if self.state is not VoiceModeState.OFF:
            return False
        self._read_aloud.listen_to_answers(self._subscribe)  # the answers' growth reaches the voice
        self._unsubscribe = [self._subscribe(self._hear_chat), self._dictation.subscribe(self._hear_dictation),
                             self._read_aloud.subscribe(self._hear_voice)]
        self._hearing = self._asked = self._answer_done = self._reading_seen = False
        self._answer_id = None
        self._listen()
        return True

    def stop(self) -> None:
        """End voice mode now: the microphone closed (its words dropped), the voice silenced, the answer stopped."""
        self._end(VoiceModeEnded(VoiceModeEnd.STOPPED))

    def window_hidden(self, hidden: bool) -> None:
        """The main window was hidden (voice mode waits once no turn is under way) or shown (it listens again)."""
        self._hidden = hidden
        if hidden and self.state is VoiceModeState.LISTENING and not self._hearing:
            self._close_microphone()
            self._cancel_silence()
            self._set(VoiceModeState.WAITING)
        elif not hidden and self.state is VoiceModeState.WAITING:
            self._listen()

    async def close(self) -> None:
        """At shutdown: voice mode off, quietly (the microphone and the voice are closed by their owners)."""
        if self.state is not VoiceModeState.OFF:
            self._end(None)

    # --- the turn ---------------------------------------------------------------------------------------------

    def _listen(self) -> None:
        """Between turns: listen for the next message (or wait while the window is hidden)."""
        self._asked, self._answer_id, self._answer_done, self._reading_seen = False, None, False, False
        self._turn(self._hearing)
        if self._hidden and not self._hearing:
            self._close_microphone()
            self._set(VoiceModeState.WAITING)
            return
        self._set(VoiceModeState.LISTENING)
        self._open_microphone()
        self._restart_silence()

    def _wants_microphone(self) -> bool:
        if self.state is VoiceModeState.LISTENING:
            return True
        return self.state in _TURN and self._settings().interrupt_by_speaking

    def _open_microphone(self) -> None:
        """Open voice mode's microphone if it should be open and is not (a mic-button dictation is ended
        first: voice mode's opens when it has)."""
        if not self._wants_microphone():
            return
        dictation = self._dictation
        if dictation.state is DictationState.IDLE:
            self._discard = False
            dictation.start(for_voice_mode=True)
        elif not dictation.for_voice_mode:
            dictation.stop()  # the composer's dictation: its words go to the message box, then ours opens

    def _close_microphone(self) -> None:
        dictation = self._dictation
        if dictation.for_voice_mode and dictation.state is not DictationState.IDLE:
            self._discard = True
            dictation.stop()
        self._hearing = False

    def _interrupt(self) -> None:
        """The person spoke over Kestrel: silence the voice and stop the answer now; what they say is next."""
        self._read_aloud.stop()
        if self._asked or (self._answer_id is not None and not self._answer_done):
            self._answers.stop(self._answer_chat())
        self._asked, self._answer_id, self._answer_done, self._reading_seen = False, None, False, False
        self._set(VoiceModeState.LISTENING)

    async def _send(self, text: str) -> None:
        """The person's words as their message in the open chat, once an answer stopped by them has ended."""
        answers = self._answers
        waited = 0.0
        while answers.open_chat_busy and waited < ANSWER_END_WAIT_S:
            await asyncio.sleep(_LOOK_S)
            waited += _LOOK_S
        if self.state is VoiceModeState.OFF:
            return
        if not answers.send(text):
            self._end(VoiceModeEnded(VoiceModeEnd.NOT_SENT, detail=text))
            return
        self._asked, self._answer_done, self._reading_seen = True, False, False
        self._set(VoiceModeState.THINKING)
        self._turn(True)
        self._open_microphone()

    def _answer_chat(self) -> int | None:
        """The chat of the answer voice mode waits for or follows (the open one until the answer started)."""
        return self._answer_chat_id if self._answer_id is not None else self._open_chat_id()

    def _turn(self, on: bool) -> None:
        if on != self._in_turn:
            self._in_turn = on
            self._mid_turn(on)

    # --- what it hears ----------------------------------------------------------------------------------------

    def _hear_dictation(self, event: DictationEvent) -> None:
        if self.state is VoiceModeState.OFF:
            return
        if isinstance(event, DictationSpeechStarted) and self._dictation.for_voice_mode:
            self._hearing = True
            self._cancel_silence()
            self._turn(True)
            if self.state in _TURN:
                self._interrupt()
        elif isinstance(event, DictationFinished) and event.voice_mode:
            self._finished(event)
        elif isinstance(event, DictationStateChanged) and event.state is DictationState.IDLE \
                and not self._dictation.for_voice_mode:
            self._open_microphone()  # the composer's dictation ended: voice mode's microphone can open

    def _finished(self, finished: DictationFinished) -> None:
        discard, self._discard, self._hearing = self._discard, False, False
        if discard:  # closed by voice mode (hidden, ended): open again if it is wanted by now
            self._open_microphone()
            return
        if not finished.ended_well:
            self._end(VoiceModeEnded(VoiceModeEnd.MICROPHONE, dictation=finished))
        elif finished.text.strip() and self.state in (VoiceModeState.LISTENING, *_TURN):
            self._spawn(self._send(finished.text.strip()))
        elif self.state is VoiceModeState.LISTENING:
            self._turn(False)
            self._open_microphone()  # a cough, or words too faint to make out: listen on
            self._restart_silence()
        else:
            self._open_microphone()

    def _hear_chat(self, event: object) -> None:
        if self.state is VoiceModeState.OFF:
            return
        if isinstance(event, AnswerStarted):
            if self._asked and event.message.conversation_id == self._open_chat_id():
                self._asked, self._answer_id = False, event.message.id
                self._answer_chat_id = event.message.conversation_id
                reader = self._read_aloud
                if reader.message_id != event.message.id or reader.state is ReadAloudState.IDLE:
                    reader.follow(event.message.id)
        elif isinstance(event, (AnswerFinished, AnswerInterrupted)):
            if event.message.id == self._answer_id:
                self._answer_done = True
        elif isinstance(event, SendFailed):
            if self._asked and event.conversation_id in (self._open_chat_id(), None):
                self._end(VoiceModeEnded(VoiceModeEnd.NOT_SENT, detail=event.text))
        elif isinstance(event, AnswerQueueChanged):
            if self._asked and self.state is VoiceModeState.THINKING and not self._answers.open_chat_busy:
                self._end(VoiceModeEnded(VoiceModeEnd.NOT_ANSWERED))  # dropped before it began (no model)

    def _hear_voice(self, event: ReadAloudEvent) -> None:
        if self.state not in _TURN or self._answer_id is None:
            return
        if isinstance(event, ReadAloudFailed):
            if event.message_id == self._answer_id:
                self._end(VoiceModeEnded(VoiceModeEnd.VOICE, reading=event))
        elif isinstance(event, ReadAloudStateChanged):
            if event.state is not ReadAloudState.IDLE:
                if event.message_id == self._answer_id:
                    self._reading_seen = True
                    if event.state is ReadAloudState.SPEAKING:
                        self._set(VoiceModeState.SPEAKING)
            elif self._reading_seen:
                if not self._answer_done:  # the voice was silenced by hand (Esc): the answer stops with it
                    self._answers.stop(self._answer_chat())
                self._listen()

    # --- inside -----------------------------------------------------------------------------------------------

    def _end(self, ended: VoiceModeEnded | None) -> None:
        if self.state is VoiceModeState.OFF:
            return
        in_turn = self.state in _TURN or self._asked
        self._set(VoiceModeState.OFF)
        self._cancel_silence()
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        self._close_microphone()
        if ended is not None and ended.why is VoiceModeEnd.STOPPED:
            if self._read_aloud.message_id is not None and self._read_aloud.message_id == self._answer_id:
                self._read_aloud.stop()
            if in_turn:
                self._answers.stop(self._answer_chat())
        self._asked, self._answer_id = False, None
        self._turn(False)
        if ended is not None:
            self._emit(ended)

    def _restart_silence(self) -> None:
        self._cancel_silence()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._silence = loop.call_later(SILENCE_LIMIT_S, self._silent)

    def _cancel_silence(self) -> None:
        if self._silence is not None:
            self._silence.cancel()
            self._silence = None

    def _silent(self) -> None:
        self._silence = None
        if self.state is VoiceModeState.LISTENING and not self._hearing:
            self._end(VoiceModeEnded(VoiceModeEnd.SILENCE))

    def _set(self, state: VoiceModeState) -> None:
        if state is not self.state:
            self.state = state
            self._emit(VoiceModeChanged(state))

    def _emit(self, event: VoiceModeEvent) -> None:
        for listener in list(self._listeners):
            listener(event)
