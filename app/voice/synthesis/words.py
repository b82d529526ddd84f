"""What the person is told when a text is refused or the synthesizer fails: the same words in the CLI and the API."""

from __future__ import annotations

from app.voice.synthesis.reading import TextProblem, TextRefused
from app.voice.synthesis.synthesizer import SynthesisFailed
from app.voice.transcriber import FailureKind

_FAILED = {
    FailureKind.TIMED_OUT: ("Speaking took longer than its limit ({detail} s) and was stopped. Try a shorter text, "
                            "or try again when the computer is less busy."),
    FailureKind.DIED: "The voice stopped unexpectedly ({detail}). Try again.",
    FailureKind.LOAD_FAILED: ("The voice could not be loaded ({detail}). Reinstall the voice packages: "
                              "pip install --force-reinstall 'kestrel[voice]'."),
    FailureKind.FAILED: "Speaking failed ({detail}). Try again, or try another text.",
}


def text_refused_words(refused: TextRefused) -> str:
    if refused.problem is TextProblem.TOO_LONG:
        return (f"The text is {refused.length:,} characters long; Kestrel reads up to {refused.limit:,} at once. "
                "Split it and send the parts.")
    return "There is nothing to read aloud: the text is empty or has no words. Give the text to speak."


def synthesis_failed_words(failed: SynthesisFailed) -> str:
    return _FAILED[failed.kind].format(detail=failed.detail)
