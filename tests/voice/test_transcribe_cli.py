"""`kestrel transcribe`: the text, JSON lines or subtitles on standard output; a user's mistakes in words with status 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers.speech import BECKETT, BECKETT_SAID, similarity, voice_or_skip

ROOT = Path(__file__).resolve().parents[2]


def kestrel(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", "transcribe", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=180)


def test_the_text_and_json_lines() -> None:
    voice_or_skip()
    text = kestrel(str(BECKETT))
    assert text.returncode == 0, text.stderr
    assert similarity(text.stdout, BECKETT_SAID) >= 0.8 and text.stdout.endswith("\n")
    lines = kestrel(str(BECKETT), "--json")
    assert lines.returncode == 0, lines.stderr
    segments = [json.loads(line) for line in lines.stdout.splitlines()]
    # One segment or several, as the CPU's kernels split it (tests/voice/test_transcriber.py says why).
    assert segments and all(segment["language"] == "en" for segment in segments)
    assert all(segment["end"] > segment["start"] for segment in segments)
    assert " ".join(segment["text"] for segment in segments) == text.stdout.strip()
    assert [segment["id"] for segment in segments] == list(range(len(segments)))


def test_mistakes_are_said_with_what_to_do(tmp_path: Path) -> None:
    voice_or_skip()
    notes = tmp_path / "notes.wav"
    notes.write_text("not a recording\n" * 50)
    cases = [((str(notes),), "could not read this file as audio"),
             ((str(tmp_path / "gone.wav"),), "There is no file"),
             ((str(tmp_path),), "is a folder"),
             ((str(BECKETT), "--language", "klingon"), "not a language code Whisper knows"),
             ((str(BECKETT), "--model", "whisper-tiny.en", "--language", "de"), "English only")]
    for args, said in cases:
        result = kestrel(*args)
        assert result.returncode == 2 and said in result.stderr and "Traceback" not in result.stderr, (args, result)
