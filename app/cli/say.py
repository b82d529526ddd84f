"""`kestrel say TEXT -o OUT.wav`: text to speech, offline, with the voice the `voice` extra ships (on Windows, Windows'
own voice by default).

Writes a 16-bit mono WAV file (-o -: to standard output), or, without -o on a terminal, plays the
speech sentence by sentence on the default output while the next sentence is made. The text is
spoken in its own child process (app/voice/synthesis/synthesizer.py); nothing is written but the output.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.terminal_text import terminal_text
from app.cli.user_error import EXIT_DEVICE, EXIT_MODEL, EXIT_OK, EXIT_USAGE, UserError
from app.core.paths import data_paths

if TYPE_CHECKING:
    from app.voice.synthesis.synthesizer import SpokenSentence

EXIT_FAILED = 1
# A book's chapter at most: read from a pipe, past this the text is refused (words, not a cut).
MAX_STDIN_BYTES = 1024 * 1024


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    say = commands.add_parser("say", help="read text aloud, offline: write it as a WAV file or play it")
    say.add_argument("text", metavar="TEXT", help="what to say; - reads it from standard input")
    say.add_argument("-o", "--output", metavar="OUT.wav",
                     help="write a WAV file (- writes it to standard output); without it, play the speech")
    say.add_argument("--voice", metavar="V", help="the voice: en_US-joe-medium (shipped; the default, except on "
                                                   "Windows, where Windows' own voice is), one downloaded with "
                                                   "`kestrel models get V`, or one of Windows' (windows-NAME); "
                                                   "`kestrel models catalog --speech` lists them")
    say.add_argument("--speed", metavar="S", type=float, default=1.0,
                     help="how fast to speak, from 0.25 to 4.0 (1.0: the voice's own pace)")
    say.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        return _say(args)
    except UserError as exc:
        print(f"kestrel: {terminal_text(str(exc))}", file=sys.stderr, flush=True)
        return exc.status


def _say(args: argparse.Namespace) -> int:
    # Imported here, not with the parser: numpy and the rest would slow every other command's start.
    from app.voice.synthesis.reading import TextRefused
    from app.voice.synthesis.synthesizer import MAX_SPEED, MIN_SPEED, SynthesisFailed, Synthesizer
    from app.voice.catalog.choice import choose_voice
    from app.voice.synthesis.voices import VoiceError
    from app.voice.synthesis.words import synthesis_failed_words, text_refused_words

    if not MIN_SPEED <= args.speed <= MAX_SPEED:
        raise UserError(f"--speed {args.speed:g} is outside what Kestrel speaks at: give a number from "
                        f"{MIN_SPEED:g} to {MAX_SPEED:g} (1.0 is the voice's own pace).", EXIT_USAGE)
    try:
        voice = choose_voice(args.voice)
    except VoiceError as exc:
        raise UserError(str(exc), EXIT_USAGE) from exc
    if args.output is None and not sys.stdout.isatty():
        raise UserError("Standard output is not a terminal, so there is nothing to play the speech on. Write a "
                        "file with -o OUT.wav (or -o - to send the WAV to standard output).", EXIT_USAGE)
    text = _text(args.text)
    synthesizer = Synthesizer(data_paths().ensure().data / "speech")
    try:
        spoken = synthesizer.speak(text, voice, args.speed)
        if args.output is None:
            _play(spoken)
        else:
            _write(spoken, args.output)
    except TextRefused as refused:
        raise UserError(text_refused_words(refused), EXIT_USAGE) from refused
    except VoiceError as exc:
        raise UserError(str(exc), EXIT_MODEL) from exc
    except SynthesisFailed as failed:
        raise UserError(synthesis_failed_words(failed), EXIT_FAILED) from failed
    finally:
        synthesizer.close()
    return EXIT_OK


def _text(given: str) -> str:
    if given != "-":
        return given
    data = sys.stdin.buffer.read(MAX_STDIN_BYTES + 1)
    if len(data) > MAX_STDIN_BYTES:
        raise UserError(f"The text on standard input is longer than Kestrel reads at once "
                        f"({MAX_STDIN_BYTES // 1024 ** 2} MB). Split it and say the parts.", EXIT_USAGE)
    return data.decode("utf-8", "replace")


def _write(spoken: Iterable[SpokenSentence], output: str) -> None:
    from app.voice.synthesis.synthesizer import wav_file

    data = wav_file(spoken)
    if output == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    path = Path(output)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        partial.write_bytes(data)
        os.replace(partial, path)
    except IsADirectoryError as exc:
        raise UserError(f"{output} is a folder. Give the file to write, such as {output}/speech.wav.", EXIT_USAGE) from exc
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise UserError(f"Could not write {output}: {exc.strerror or exc}.", EXIT_USAGE) from exc


def _play(spoken: Iterable[SpokenSentence]) -> None:
    """Each sentence played as it comes; the next is made meanwhile. A missing sound system or speaker: words."""
    from app.voice.device_words import device_words
    from app.voice.devices import DeviceUnavailable
    from app.voice.playback import Playback, PlaybackEnd

    playback = Playback()
    try:
        for sentence in spoken:
            playback.play(sentence.samples, sentence.sample_rate)
            while (ended := playback.wait(0.1)) is None:
                pass
            if ended.how is PlaybackEnd.DEVICE_LOST:
                raise UserError("The speaker stopped (was it unplugged?). Plug it back in and try again, or write a "
                                "file with -o OUT.wav.", EXIT_DEVICE)
    except DeviceUnavailable as unavailable:
        raise UserError(f"{device_words(unavailable)} Or write the speech to a file with -o OUT.wav.",
                        EXIT_DEVICE) from unavailable
    finally:
        playback.stop()
