"""What the window says about voice mode: its button's tooltips, the listening bar's line in each state, and each way it ends."""

from __future__ import annotations

from app.service.voice.dictation_events import DictationState
from app.service.voice.voice_mode_events import VoiceModeEnd, VoiceModeEnded, VoiceModeState
from app.ui.voice import dictation_words
from app.ui.voice.read_aloud_words import failed_words

SHORTCUT = "Ctrl+Shift+T"
READY_TIP = f"Talk with Kestrel hands-free ({SHORTCUT})"
ON_TIP = f"End voice mode ({SHORTCUT} or Esc)"
# The mic button while voice mode has the microphone.
MIC_TIP = f"Voice mode is listening: its words are sent for you. End it ({SHORTCUT} or Esc) to dictate."
LISTENING = "Listening — speak when you are ready"
HEARING = "Hearing you…"
SENDING = "Sending your words…"
THINKING = "Thinking…"
SPEAKING = "Speaking — talk to interrupt"
SPEAKING_ESC = "Speaking — press Esc to stop"
WAITING = "Voice mode waits while Kestrel is hidden"
SILENCE = "Voice mode ended: nobody spoke for 5 minutes."
NOT_SENT = "Your words are in the message box: the chat could not take them now."
NOT_ANSWERED = "Voice mode ended: Kestrel could not answer (see the message above)."
_ENDED = "Voice mode ended."


def status_words(state: VoiceModeState, dictation: DictationState, *, hearing: bool, heard: bool,
                 interrupt: bool) -> str:
    """The bar's line while voice mode is on: where it is, and while it listens, where the listening is.

    hearing: the person's speech has started (and not ended); heard: words of theirs were recognised and
    are on their way to the chat; interrupt: the setting "stop talking when I start to speak"."""
    if state is VoiceModeState.WAITING:
        return WAITING
    if state is VoiceModeState.THINKING:
        return THINKING
    if state is VoiceModeState.SPEAKING:
        return SPEAKING if interrupt else SPEAKING_ESC
    if dictation is DictationState.OPENING:
        return dictation_words.OPENING
    if hearing:
        return HEARING
    if heard and dictation is not DictationState.LISTENING:
        return SENDING
    return LISTENING


def ended_words(ended: VoiceModeEnded) -> str:
    """Why voice mode ended, for the bar ("" when the person ended it)."""
    why = ended.why
    if why is VoiceModeEnd.SILENCE:
        return SILENCE
    if why is VoiceModeEnd.MICROPHONE and ended.dictation is not None:
        problem = dictation_words.finished_words(ended.dictation)
        return f"{_ENDED} {problem}" if problem else _ENDED
    if why is VoiceModeEnd.VOICE and ended.reading is not None:
        return f"{_ENDED} {failed_words(ended.reading)}"
    if why is VoiceModeEnd.NOT_SENT:
        return NOT_SENT
    if why is VoiceModeEnd.NOT_ANSWERED:
        return NOT_ANSWERED
    return "" if why is VoiceModeEnd.STOPPED else _ENDED
