"""A transcript written as OpenAI's response formats (json, text, verbose_json, srt, vtt), for the API and the CLI alike."""

from __future__ import annotations

import json
from enum import StrEnum

from app.voice.protocol import Segment, Transcript


class TranscriptFormat(StrEnum):
    JSON = "json"
    TEXT = "text"
    VERBOSE_JSON = "verbose_json"
    SRT = "srt"
    VTT = "vtt"


def transcript_json(transcript: Transcript) -> dict[str, object]:
    """OpenAI's Transcription: the text alone."""
    return {"text": transcript.text}


def transcript_verbose(transcript: Transcript) -> dict[str, object]:
    """OpenAI's TranscriptionVerbose. language is the ISO 639-1 code (OpenAI writes the English name)."""
    return {"task": "transcribe", "language": transcript.language, "duration": transcript.duration,
            "text": transcript.text, "segments": [_segment(number, segment)
                                                  for number, segment in enumerate(transcript.segments)]}


def _segment(number: int, segment: Segment) -> dict[str, object]:
    return {"id": number, "seek": segment.seek, "start": segment.start, "end": segment.end, "text": segment.text,
            "tokens": list(segment.tokens), "temperature": segment.temperature, "avg_logprob": segment.avg_logprob,
            "compression_ratio": segment.compression_ratio, "no_speech_prob": segment.no_speech_prob}


def subtitles(transcript: Transcript, webvtt: bool) -> str:
    """SubRip (numbered cues, comma before the milliseconds) or WebVTT (a header, a dot)."""
    cues = []
    for number, segment in enumerate(transcript.segments, 1):
        times = f"{_clock(segment.start, webvtt)} --> {_clock(segment.end, webvtt)}"
        text = segment.text.replace("-->", "->")  # the arrow would end the cue's timing line
        cues.append(f"{times}\n{text}\n" if webvtt else f"{number}\n{times}\n{text}\n")
    return ("WEBVTT\n\n" if webvtt else "") + "\n".join(cues)


def _clock(seconds: float, webvtt: bool) -> str:
    millis = max(0, round(seconds * 1000))
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    whole, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{whole:02d}{'.' if webvtt else ','}{millis:03d}"


def written(transcript: Transcript, form: TranscriptFormat) -> str:
    """The transcript as form's text (JSON serialised, text with a final newline)."""
    if form is TranscriptFormat.JSON:
        return json.dumps(transcript_json(transcript), ensure_ascii=False)
    if form is TranscriptFormat.VERBOSE_JSON:
        return json.dumps(transcript_verbose(transcript), ensure_ascii=False)
    if form is TranscriptFormat.TEXT:
        return transcript.text + "\n"
    return subtitles(transcript, webvtt=form is TranscriptFormat.VTT)
