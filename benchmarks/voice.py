"""Voice on this machine: speech to text and text to speech with the shipped models, timed, with word errors.

    python benchmarks/voice.py [--runs 5] [--json OUT]

Speech to text, for each Whisper model the `voice` extra ships (tiny.en, the default, and base):
- real-time factor (seconds to transcribe / seconds of audio) on the real recordings in tests/fixtures/speech
  (one person reading; where it came from and its licence are in that folder's README), the transcriber warm
  (its child started and the model loaded, as in the window after the first press);
- word error rate against what was said (edit distance over words, lower case, punctuation ignored);
- end of speech -> final text for a 5-second utterance: the detector's silence hang-over (the time it waits
  before it calls the speech over) plus the time to transcribe 5 s of the recording.
Text to speech, with the default voice (en_US-joe-medium), when its packages are installed:
- time to the first sentence's audio and real-time factor over a short answer of four sentences;
- a round trip: the recording's words said by the voice, then heard by tiny.en (word error rate).
Not measured yet: voice to voice (end of speech -> first sound of the answer) and barge-in need voice mode,
which is not built; the table says so rather than leaving them out.

Goals (issue 38): speech-to-text RTF <= 0.15 for the default model; end of speech -> final text <= 0.5 s for
a 5-second utterance. Every number is the median of the runs; the table prints the worst too.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import time
import wave
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.voice.audio import AudioKind  # noqa: E402
from app.voice.protocol import TranscribeAsk  # noqa: E402
from app.voice.speech_models import SPEECH_MODELS, SpeechModel, ensure_speech_model, shipped  # noqa: E402
from app.voice.transcriber import Transcriber  # noqa: E402
from app.voice.vad import VadSettings  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "speech"
# Each real recording and what its speaker said (tests/fixtures/speech/README.md).
RECORDINGS = {"beckett.wav": "Ever tried. Ever failed. No matter. Try again. Fail again. Fail better."}
UTTERANCE_S = 5.0
ANSWER = ("Paris is the capital of France. It lies on the Seine, in the north of the country. "
          "About two million people live in the city itself. The metro carries most of them to work.")
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "voice.json"
STT_RTF_GOAL = 0.15
FINAL_TEXT_GOAL_S = 0.5


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def word_error_rate(heard: str, said: str) -> float:
    """(substitutions + deletions + insertions) / words said, by edit distance over words."""
    ref, hyp = words(said), words(heard)
    row = list(range(len(hyp) + 1))
    for i, word in enumerate(ref, 1):
        previous, row[0] = row[0], i
        for j, other in enumerate(hyp, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (word != other))
    return row[-1] / max(len(ref), 1)


def pcm16(path: Path, seconds: float | None = None) -> tuple[bytes, float]:
    """A 16 kHz mono 16-bit WAV's frames (the first `seconds` of them) and their length in seconds."""
    with wave.open(str(path), "rb") as reader:
        if (reader.getframerate(), reader.getnchannels(), reader.getsampwidth()) != (16_000, 1, 2):
            raise SystemExit(f"{path.name}: expected 16 kHz mono 16-bit PCM")
        count = reader.getnframes() if seconds is None else min(reader.getnframes(), int(seconds * 16_000))
        return reader.readframes(count), count / 16_000


def timed(call: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    result = call()
    return result, time.perf_counter() - start


def speech_to_text(model: SpeechModel, speech: Path, runs: int) -> dict[str, Any]:
    ensure_speech_model(model, speech)
    transcriber = Transcriber(model, speech)
    try:
        first, load_s = timed(lambda: transcriber.transcribe(TranscribeAsk(pcm16(FIXTURES / "beckett.wav")[0],
                                                                          AudioKind.PCM16, "en")))
        rows = []
        for name, said in RECORDINGS.items():
            frames, seconds = pcm16(FIXTURES / name)
            times, errors = [], []
            for _ in range(runs):
                transcript, spent = timed(lambda: transcriber.transcribe(TranscribeAsk(frames, AudioKind.PCM16, "en")))
                times.append(spent)
                errors.append(word_error_rate(transcript.text, said))
            rows.append({"recording": name, "seconds": round(seconds, 2),
                         "rtf_median": round(statistics.median(times) / seconds, 3),
                         "rtf_worst": round(max(times) / seconds, 3), "wer": round(statistics.median(errors), 3)})
        utterance, _ = pcm16(FIXTURES / "beckett.wav", UTTERANCE_S)
        transcribe_5s = statistics.median(timed(lambda: transcriber.transcribe(
            TranscribeAsk(utterance, AudioKind.PCM16, "en")))[1] for _ in range(runs))
    finally:
        transcriber.close()
    hang_over_s = VadSettings().hang_over_ms / 1000
    return {"model": model.id, "first_answer_s": round(load_s, 2), "recordings": rows,
            "utterance_s": UTTERANCE_S, "hang_over_s": hang_over_s, "transcribe_5s": round(transcribe_5s, 3),
            "final_text_s": round(hang_over_s + transcribe_5s, 3), "heard_first": first.text}


def text_to_speech(speech: Path, runs: int) -> dict[str, Any]:
    """The default voice: first audio, RTF, and the round trip through tiny.en; or why it was not measured."""
    try:
        from app.voice.synthesis.synthesizer import Synthesizer, wav_file
        from app.voice.synthesis.voices import DEFAULT_VOICE
    except ImportError as missing:
        return {"skipped": f"text to speech is not here ({missing})"}
    synthesizer = Synthesizer(speech)
    try:
        try:
            list(synthesizer.speak("Hello."))  # the child started and the voice loaded, as after a first read
        except Exception as exc:  # the voice packages missing or changed: said, not raised
            return {"skipped": f"the voice could not speak: {type(exc).__name__}: {exc}"}
        firsts, rtfs = [], []
        for _ in range(runs):
            start = time.perf_counter()
            spoken = []
            for sentence in synthesizer.speak(ANSWER):
                if not spoken:
                    firsts.append(time.perf_counter() - start)
                spoken.append(sentence)
            rtfs.append((time.perf_counter() - start) / sum(sentence.seconds for sentence in spoken))
        said = RECORDINGS["beckett.wav"]
        wav = wav_file(synthesizer.speak(said))
    finally:
        synthesizer.close()
    round_trip = round_trip_wer(wav, said, speech)
    return {"voice": DEFAULT_VOICE.id, "first_audio_s": round(statistics.median(firsts), 3),
            "first_audio_worst_s": round(max(firsts), 3), "rtf_median": round(statistics.median(rtfs), 3),
            "round_trip_wer": round(round_trip, 3)}


def round_trip_wer(wav: bytes, said: str, speech: Path) -> float:
    model = SPEECH_MODELS[0]
    transcriber = Transcriber(model, speech)
    try:
        with wave.open(io.BytesIO(wav), "rb"):
            pass  # a readable WAV, or wave.Error here rather than in the child
        return word_error_rate(transcriber.transcribe(TranscribeAsk(wav, AudioKind.FILE, "en")).text, said)
    finally:
        transcriber.close()


def print_table(report: dict[str, Any]) -> None:
    print(f"{'speech to text':<16} {'recording':<12} {'RTF median':>10} {'RTF worst':>9} {'WER':>6} "
          f"{'5 s: end of speech -> text':>27}")
    for row in report["speech_to_text"]:
        for rec in row["recordings"]:
            print(f"{row['model']:<16} {rec['recording']:<12} {rec['rtf_median']:>10.3f} {rec['rtf_worst']:>9.3f} "
                  f"{rec['wer']:>6.1%} {row['final_text_s']:>21.2f} s "
                  f"({row['hang_over_s']:.2f} hang-over + {row['transcribe_5s']:.2f})")
    tts = report["text_to_speech"]
    if "skipped" in tts:
        print(f"text to speech: not measured: {tts['skipped']}")
    else:
        print(f"text to speech ({tts['voice']}): first audio {tts['first_audio_s']:.2f} s median "
              f"({tts['first_audio_worst_s']:.2f} worst), RTF {tts['rtf_median']:.3f}, "
              f"round trip through tiny.en: WER {tts['round_trip_wer']:.1%}")
    for name, why in report["not_measured"].items():
        print(f"{name}: not measured: {why}")
    for goal, met in report["goals"].items():
        print(f"goal {goal}: {'met' if met else 'NOT met'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = parser.parse_args()
    models = [model for model in SPEECH_MODELS if shipped(model)]
    if not models:
        raise SystemExit("The voice extra is not installed: pip install -e '.[voice]'")
    with tempfile.TemporaryDirectory(prefix="kestrel-voice-bench-") as folder:
        speech = Path(folder)
        stt = [speech_to_text(model, speech, args.runs) for model in models]
        tts = text_to_speech(speech, args.runs)
    default = stt[0]
    report = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load": os.getloadavg()},
        "runs": args.runs, "speech_to_text": stt, "text_to_speech": tts,
        "not_measured": {"voice to voice": "voice mode is not built yet",
                         "barge-in": "voice mode is not built yet"},
        "goals": {f"STT RTF <= {STT_RTF_GOAL} ({default['model']})":
                  all(rec["rtf_median"] <= STT_RTF_GOAL for rec in default["recordings"]),
                  f"end of speech -> final text <= {FINAL_TEXT_GOAL_S} s (5 s, {default['model']})":
                  default["final_text_s"] <= FINAL_TEXT_GOAL_S},
    }
    print_table(report)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"JSON: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
