"""`kestrel transcribe FILE`: speech to text, offline, with the speech model the `voice` extra ships.

Prints the text (or JSON lines, one per segment, or SRT/WebVTT subtitles). The file is read here and
sent to the transcription child (app/voice/transcriber.py); nothing is written but the output.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from typing import TYPE_CHECKING

from app.cli.terminal_text import terminal_text
from app.cli.user_error import EXIT_MODEL, EXIT_OK, EXIT_USAGE, UserError
from app.core.paths import data_paths
from app.voice.catalog.choice import choose_speech_model
from app.voice.speech_models import SHIPPED_SPEECH_MODELS, SpeechModelError

if TYPE_CHECKING:
    from app.voice.protocol import Transcript

# Two hours of 48 kHz stereo 16-bit WAV is about 1.4 GB: past this a file is refused before it is read.
MAX_FILE_BYTES = 2 * 1024 ** 3
EXIT_FAILED = 1
FORMATS = ("text", "json", "srt", "vtt")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    transcribe = commands.add_parser("transcribe", help="turn a recording into text, offline (WAV, MP3, FLAC, Ogg, "
                                                        "M4A, WebM)")
    transcribe.add_argument("file", metavar="FILE", help="the recording; - reads it from standard input")
    transcribe.add_argument("--language", metavar="L", help="the language spoken, as a code such as en or de "
                                                            "(any but en uses the multilingual model)")
    transcribe.add_argument("--format", choices=FORMATS, default="text",
                            help="text (the default), json (one JSON object per segment and line), srt or vtt")
    transcribe.add_argument("--json", action="store_const", const="json", dest="format",
                            help="the same as --format json")
    transcribe.add_argument("--model", metavar="ID",
                            help=f"the speech model: {', '.join(model.id for model in SHIPPED_SPEECH_MODELS)} (shipped) "
                                 "or one downloaded with `kestrel models get ID` (`kestrel models catalog --speech` "
                                 "lists them); by default the English one, or the multilingual one for another "
                                 "--language")
    transcribe.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # Imported here, not with the parser: numpy and the rest would slow every other command's start.
    from app.voice.transcript_formats import TranscriptFormat, written

    try:
        transcript = _transcribe(args)
    except UserError as exc:
        print(f"kestrel: {terminal_text(str(exc))}", file=sys.stderr, flush=True)
        return exc.status
    if args.format == "json":
        for number, segment in enumerate(transcript.segments):
            print(json.dumps({"id": number, "start": segment.start, "end": segment.end, "text": segment.text,
                              "language": transcript.language}, ensure_ascii=False))
    else:
        sys.stdout.write(written(transcript, TranscriptFormat(args.format)))
    return EXIT_OK


def _transcribe(args: argparse.Namespace) -> Transcript:
    from app.voice.audio import AudioKind, AudioRefused
    from app.voice.protocol import TranscribeAsk
    from app.voice.transcriber import Transcriber, TranscriptionFailed
    from app.voice.words import audio_refused_words, transcription_failed_words

    language = args.language.strip().lower() if args.language else None
    try:
        model = choose_speech_model(args.model, language)
    except SpeechModelError as exc:
        raise UserError(str(exc), EXIT_USAGE) from exc
    audio = _read(args.file)
    transcriber = Transcriber(model, data_paths().ensure().data / "speech")
    try:
        return transcriber.transcribe(TranscribeAsk(audio, AudioKind.FILE, language))
    except AudioRefused as refused:
        raise UserError(f"{args.file}: {audio_refused_words(refused)}", EXIT_USAGE) from refused
    except SpeechModelError as exc:
        raise UserError(str(exc), EXIT_MODEL) from exc
    except TranscriptionFailed as failed:
        raise UserError(transcription_failed_words(failed), EXIT_FAILED) from failed
    finally:
        transcriber.close()


def _read(name: str) -> bytes:
    if name == "-":
        data = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
    else:
        path = Path(name)
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                raise UserError(f"{name} is larger than Kestrel transcribes at once ({MAX_FILE_BYTES // 1024 ** 3} GB). "
                                "Split it and transcribe the parts.", EXIT_USAGE)
            data = path.read_bytes()
        except IsADirectoryError as exc:
            raise UserError(f"{name} is a folder. Give the recording's file.", EXIT_USAGE) from exc
        except FileNotFoundError as exc:
            raise UserError(f"There is no file {name}. Check the name and try again.", EXIT_USAGE) from exc
        except OSError as exc:
            raise UserError(f"Could not read {name}: {exc.strerror or exc}.", EXIT_USAGE) from exc
    if len(data) > MAX_FILE_BYTES:
        raise UserError(f"The recording is larger than Kestrel transcribes at once ({MAX_FILE_BYTES // 1024 ** 3} GB).",
                        EXIT_USAGE)
    return data
