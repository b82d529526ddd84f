"""How a speech model or voice would run on this machine, before it is downloaded: whether it fits in memory,
and how fast it would be against real time, judged from speeds measured on a quiet 2-core machine.

The measured points (benchmarks/voice.py, docs/benchmarks.md; int8 on the CPU, 2 threads, no GPU):
Whisper tiny.en (39 M parameters) transcribes at 0.035 of real time, Whisper base (74 M) at 0.065, about
linear in the parameters; the Piper voice joe (medium, 63 MB) speaks at 0.22 of real time. A bigger model is
taken to scale with its parameters (a voice with its file), and more cores to help in proportion up to 8.
These are estimates and are worded as such; nothing here is measured on the user's machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from app.core.units import human_size
from app.hardware.report import HardwareReport

# Whisper base's real-time factor per million parameters, measured on 2 cores.
_WHISPER_RTF_PER_M = 0.065 / 74
_VOICE_RTF_PER_BYTE = 0.22 / 63_201_294
_MEASURED_CORES = 2
_MOST_CORES_COUNTED = 8
# What loading a model takes beside its file: the runtime, buffers, the audio (CTranslate2 converts float16 to
# int8 as it loads, so the file's size is an upper bound for the weights).
_OVERHEAD_BYTES = 300 * 1024 * 1024
# Real-time factors: below GOOD the words come as the person talks (a conversation); below SLOW dictation waits
# a little at the end of each utterance; above 1.0 the model falls behind speech.
GOOD_RTF = 0.25
SLOW_RTF = 0.6


class SpeechVerdict(StrEnum):
    GOOD = "good"  # quick enough to talk to
    SLOW = "slow"  # fine for dictation, slow for a conversation
    TOO_SLOW = "too_slow"  # slower than speech
    TOO_BIG = "too_big"  # more memory than this machine has


@dataclass(frozen=True)
class SpeechFit:
    verdict: SpeechVerdict
    real_time_factor: float  # seconds of work per second of speech, estimated
    memory_bytes: int
    words: str  # the verdict and its reason, in a line


def whisper_fit(parameters_m: int, file_bytes: int, report: HardwareReport | None) -> SpeechFit:
    """A Whisper model's fit: transcription speed against real time, and memory."""
    rtf = parameters_m * _WHISPER_RTF_PER_M * _core_factor(report)
    return _judged(rtf, file_bytes, report, "transcribes", "fine for dictation, slow for a conversation")


def voice_fit(file_bytes: int, report: HardwareReport | None) -> SpeechFit:
    """A Piper voice's fit: speaking speed against real time, and memory."""
    rtf = file_bytes * _VOICE_RTF_PER_BYTE * _core_factor(report)
    return _judged(rtf, file_bytes, report, "speaks", "its first words come late")


def _core_factor(report: HardwareReport | None) -> float:
    cores = report.cpu.cores if report is not None and report.cpu is not None and report.cpu.cores else None
    return _MEASURED_CORES / min(max(cores or _MEASURED_CORES, 1), _MOST_CORES_COUNTED)


def _judged(rtf: float, file_bytes: int, report: HardwareReport | None, does: str, slow: str) -> SpeechFit:
    need = file_bytes + _OVERHEAD_BYTES
    total = report.ram.total if report is not None and report.ram is not None else None
    seconds = f"about {rtf:.2f} s of work for each second of speech, an estimate"
    if total is not None and need > total * 0.8:
        return SpeechFit(SpeechVerdict.TOO_BIG, rtf, need, f"Too big: it needs about {human_size(need)} of memory, "
                                                           f"and this computer has {human_size(total)}.")
    if rtf > 1.0:
        return SpeechFit(SpeechVerdict.TOO_SLOW, rtf, need, f"Too slow here: it {does} slower than people talk "
                                                            f"({seconds}).")
    if rtf > GOOD_RTF:
        return SpeechFit(SpeechVerdict.SLOW, rtf, need, f"Slow here: {slow} ({seconds}).")
    return SpeechFit(SpeechVerdict.GOOD, rtf, need, f"Runs well here ({seconds}).")
