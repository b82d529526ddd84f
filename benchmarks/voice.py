"""Voice on this machine: speech to text and text to speech with the shipped models, timed, with word errors.

    python benchmarks/voice.py [--runs 5] [--turns 20] [--barge-ins 5] [--model PATH] [--speech kestrel|beckett]
                               [--json OUT]

Speech to text, for each Whisper model the `voice` extra ships (tiny.en, the default, and base):
- real-time factor (seconds to transcribe / seconds of audio) on the real recordings in tests/fixtures/speech
  (one person reading; where it came from and its licence are in that folder's README), the transcriber warm
  (its child started and the model loaded, as in the window after the first press);
- word error rate against what was said (edit distance over words, lower case, punctuation ignored);
- end of speech -> final text for a 5-second utterance: the recording with its pauses shortened to 0.15 s
  (one utterance: the detector's hang-over is 0.5 s), its first 5 s and then silence, fed to the
  real dictation pipeline (detector, early words, transcriber) by a microphone that gives a 32 ms block every
  32 ms, from the last sample of speech fed to the text coming out; beside it, the detector's silence
  hang-over (the time it waits before it calls the speech over) and the time to transcribe 5 s of the
  recording, which without early words (app/voice/dictation.py) it took one after the other.
Text to speech, with the default voice (en_US-joe-medium), when its packages are installed:
- time to the first sentence's audio and real-time factor over a short answer of four sentences;
- a round trip: the recording's words said by the voice, then heard by tiny.en (word error rate).
Voice mode (benchmarks/voice_turns.py: a real Service on a private PulseAudio, the starter model or --model):
- voice to voice: the end of a spoken question in the room -> the first sound of the answer on the speaker,
  over --turns turns (after one warm-up), with where the time went (the silence waited for, the words, the
  first token, the first clause, the voice); the questions are said by Kestrel's own Piper voice (synthetic
  speech), or with --speech beckett by the real recording's "Ever tried.";
- barge-in: the real recording spoken over a long answer -> the speaker silent, --barge-ins tries.
Each part is left out, said, with --runs 0 (speech to text and text to speech), --turns 0 or --barge-ins 0.

Goals (issue 38): speech-to-text RTF <= 0.15 for the default model; end of speech -> final text <= 0.5 s for
a 5-second utterance; voice to voice <= 1.5 s median; barge-in <= 200 ms median. The speech-to-text and
text-to-speech numbers are medians of the runs, with the worst; voice mode's are median, p95 and max.
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
import threading
import time
import wave
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.voice.audio import AudioKind  # noqa: E402
from app.voice.protocol import TranscribeAsk  # noqa: E402
from app.voice.speech_models import SPEECH_MODELS, SpeechModel, ensure_speech_model, shipped  # noqa: E402
from app.voice.transcriber import Transcriber  # noqa: E402
from app.voice.vad import VadSettings  # noqa: E402
from benchmarks.voice_turns import BARGE_IN_GOAL_MS, VOICE_TO_VOICE_GOAL_S  # noqa: E402
from benchmarks.voice_turns import measure as measure_voice_mode  # noqa: E402

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
        utterance = one_utterance(pcm16(FIXTURES / "beckett.wav")[0], UTTERANCE_S)
        transcribe_5s = statistics.median(timed(lambda: transcriber.transcribe(
            TranscribeAsk(utterance, AudioKind.PCM16, "en")))[1] for _ in range(runs))
        final_text_s = statistics.median(end_of_speech_to_text(transcriber, utterance) for _ in range(runs))
    finally:
        transcriber.close()
    hang_over_s = VadSettings().hang_over_ms / 1000
    return {"model": model.id, "first_answer_s": round(load_s, 2), "recordings": rows,
            "utterance_s": UTTERANCE_S, "hang_over_s": hang_over_s, "transcribe_5s": round(transcribe_5s, 3),
            "final_text_s": round(final_text_s, 3), "heard_first": first.text}


def one_utterance(frames: bytes, seconds: float, pause_s: float = 0.15) -> bytes:
    """The first `seconds` of a recording whose pauses (the detector's 32 ms windows that are not speech) are cut to
    pause_s: one utterance, the detector's hang-over being 0.5 s."""
    from app.voice.vad import WINDOW, VoiceActivity

    samples = np.frombuffer(frames, dtype="<i2").astype(np.int16)
    detector = VoiceActivity()
    kept: list[Any] = []
    quiet = 0
    for at in range(0, samples.size - WINDOW + 1, WINDOW):
        window = samples[at:at + WINDOW]
        detector.feed(window)
        quiet = 0 if detector.voiced else quiet + 1
        if quiet * WINDOW <= pause_s * 16_000:
            kept.append(window)
    return np.concatenate(kept)[:round(seconds * 16_000)].astype("<i2").tobytes()


class PacedMicrophone:
    """A microphone that hears the given samples in real time: a 32 ms block every 32 ms, then nothing more.
    handed_at(sample): when the block holding that sample was read."""

    BLOCK = 512

    def __init__(self, samples: Any) -> None:
        self._samples = samples
        self._next = 0
        self._stopped = threading.Event()
        self._started = 0.0
        self._handed: list[float] = []  # when each block was read

    def start(self) -> None:
        self._started = time.perf_counter()

    def read(self, timeout: float) -> Any:
        from app.voice.microphone import MicrophoneEnded

        if self._stopped.is_set() or self._next >= len(self._samples):
            return MicrophoneEnded()
        due = self._started + (self._next + self.BLOCK) / 16_000
        if due > time.perf_counter():
            time.sleep(due - time.perf_counter())
        block = self._samples[self._next:self._next + self.BLOCK]
        self._next += self.BLOCK
        self._handed.append(time.perf_counter())
        return block

    def handed_at(self, sample: int) -> float:
        return self._handed[min(sample // self.BLOCK, len(self._handed) - 1)]

    def stop(self) -> None:
        self._stopped.set()

    def heard_at(self, sample: int) -> float:
        return self._started + sample / 16_000


def end_of_speech_to_text(transcriber: Transcriber, utterance: bytes) -> float:
    """The utterance then two seconds of silence through the real dictation pipeline in real time: seconds from
    the reading of its last word's end (where the detector found it: the last text's end less the audio kept
    after it) to that text coming out."""
    from app.voice.dictation import DictationPipeline, DictationSettings, Heard
    from app.voice.vad import VoiceActivity

    speech = np.frombuffer(utterance, dtype="<i2").astype(np.int16)
    mic = PacedMicrophone(np.concatenate([speech, np.zeros(32_000, np.int16)]))
    heard: list[tuple[Heard, float]] = []
    settings = DictationSettings(language="en")

    def on_event(event: Any) -> None:
        if isinstance(event, Heard):
            heard.append((event, time.perf_counter()))

    pipeline = DictationPipeline(mic, transcriber, VoiceActivity(), on_event, settings, spoken=None)  # type: ignore[arg-type]
    pipeline.start()
    pipeline.wait(60)
    if not heard:
        raise SystemExit("the dictation pipeline heard no words in the 5-second utterance")
    last, came_at = heard[-1]
    last_word = round(last.end * 16_000) - settings.after_ms * 16
    return came_at - mic.handed_at(last_word)


def text_to_speech(speech: Path, runs: int) -> dict[str, Any]:
    """The default voice: first audio, RTF, and the round trip through tiny.en; or why it was not measured."""
    try:
        from app.voice.synthesis.synthesizer import Synthesizer, wav_file
        from app.voice.synthesis.voices import JOE
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
    return {"voice": JOE.id, "first_audio_s": round(statistics.median(firsts), 3),
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
    if report["speech_to_text"]:
        print(f"{'speech to text':<16} {'recording':<12} {'RTF median':>10} {'RTF worst':>9} {'WER':>6} "
              f"{'5 s: end of speech -> text':>27}")
    for row in report["speech_to_text"]:
        for rec in row["recordings"]:
            print(f"{row['model']:<16} {rec['recording']:<12} {rec['rtf_median']:>10.3f} {rec['rtf_worst']:>9.3f} "
                  f"{rec['wer']:>6.1%} {row['final_text_s']:>21.2f} s "
                  f"(hang-over {row['hang_over_s']:.2f}, transcribing {row['transcribe_5s']:.2f})")
    tts = report["text_to_speech"]
    if not tts:
        pass
    elif "skipped" in tts:
        print(f"text to speech: not measured: {tts['skipped']}")
    else:
        print(f"text to speech ({tts['voice']}): first audio {tts['first_audio_s']:.2f} s median "
              f"({tts['first_audio_worst_s']:.2f} worst), RTF {tts['rtf_median']:.3f}, "
              f"round trip through tiny.en: WER {tts['round_trip_wer']:.1%}")
    print_voice_mode(report["voice_to_voice"], report["barge_in"])
    for name, why in report["not_measured"].items():
        print(f"{name}: not measured: {why}")
    for goal, met in report["goals"].items():
        print(f"goal {goal}: {'met' if met else 'NOT met'}")


def print_voice_mode(turns: dict[str, Any], barge_in: dict[str, Any]) -> None:
    if "skipped" in turns:
        print(f"voice to voice: not measured: {turns['skipped']}")
    else:
        first, failed = turns["first_turn"], len(turns["failed"])
        after = "" if first is None else f" after a first of {first['total_s']:.2f} s"
        print(f"voice to voice ({turns['model']}; questions: {turns['speech']}; {turns['turns']} turns{after}"
              f"{f', {failed} failed' if failed else ''})")
        print(f"  {'':<58} {'median':>8} {'p95':>8} {'max':>8}")
        print(f"  {'end of speech -> first sound of the answer':<58} " + seconds(turns["total_s"]))
        for part, why in (("silence", "speech end -> Whisper started (early words or hang-over)"),
                          ("words", "-> turn over (Whisper; a statement: quiet for 1 s)"),
                          ("sent", "-> voice mode sent them"), ("first token", "-> the answer's first text"),
                          ("first clause", "-> the voice handed its first piece"),
                          ("voice", "-> its first sound on the speaker")):
            print(f"    {part + ': ' + why:<56} " + seconds(turns["parts_s"][part]))
    if "skipped" in barge_in:
        print(f"barge-in: not measured: {barge_in['skipped']}")
    else:
        left_out = f", {barge_in['left_out']} left out: the voice silent at the onset" if barge_in["left_out"] else ""
        print(f"barge-in ({barge_in['person']} over the answer; {barge_in['tries']} tries{left_out})")
        print(f"  {'speech onset -> speaker silent':<58} " + millis(barge_in["silenced_ms"]))
        for part, why in (("detector", "onset -> the detector's speech start"),
                          ("stop", "-> the voice's stream told to stop"), ("last sound", "-> its last sound out")):
            print(f"    {part + ': ' + why:<56} " + millis(barge_in["parts_ms"][part]))


def seconds(spread: dict[str, float]) -> str:
    return " ".join(f"{spread[key]:>6.2f} s" for key in ("median", "p95", "max"))


def millis(spread: dict[str, float]) -> str:
    return " ".join(f"{spread[key]:>5.0f} ms" for key in ("median", "p95", "max"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="speech to text and text to speech (0: left out)")
    parser.add_argument("--turns", type=int, default=20, help="voice to voice, after one warm-up (0: left out)")
    parser.add_argument("--barge-ins", type=int, default=5, help="barge-in tries (0: left out)")
    parser.add_argument("--model", type=Path, default=None,
                        help="the GGUF voice mode answers with (default: the starter, from its chunk packages)")
    parser.add_argument("--speech", choices=("kestrel", "beckett"), default="kestrel",
                        help="who asks: Kestrel's own voice (synthetic) or the real recording's \"Ever tried.\"")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = parser.parse_args()
    load_before = os.getloadavg()
    models = [model for model in SPEECH_MODELS if shipped(model)]
    if not models:
        raise SystemExit("The voice extra is not installed: pip install -e '.[voice]'")
    if args.model is not None and not args.model.is_file():
        raise SystemExit(f"{args.model}: no such model file")
    stt: list[dict[str, Any]] = []
    tts: dict[str, Any] = {}
    if args.runs > 0:
        with tempfile.TemporaryDirectory(prefix="kestrel-voice-bench-") as folder:
            speech = Path(folder)
            stt = [speech_to_text(model, speech, args.runs) for model in models]
            tts = text_to_speech(speech, args.runs)
    turns, barge_in = measure_voice_mode(args)
    goals: dict[str, bool] = {}
    if stt:
        default = stt[0]
        goals[f"STT RTF <= {STT_RTF_GOAL} ({default['model']})"] = \
            all(rec["rtf_median"] <= STT_RTF_GOAL for rec in default["recordings"])
        goals[f"end of speech -> final text <= {FINAL_TEXT_GOAL_S} s (5 s, {default['model']})"] = \
            default["final_text_s"] <= FINAL_TEXT_GOAL_S
    if "goal_met" in turns:
        goals[f"voice to voice <= {VOICE_TO_VOICE_GOAL_S} s median"] = turns["goal_met"]
    if "goal_met" in barge_in:
        goals[f"barge-in <= {BARGE_IN_GOAL_MS:.0f} ms median"] = barge_in["goal_met"]
    not_measured = {name: part["skipped"] for name, part in (("voice to voice", turns), ("barge-in", barge_in))
                    if "skipped" in part}
    if not stt:
        not_measured["speech to text and text to speech"] = "--runs 0"
    report = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load": load_before,
                    "load_after": os.getloadavg()},
        "runs": args.runs, "speech_to_text": stt, "text_to_speech": tts,
        "voice_to_voice": turns, "barge_in": barge_in, "not_measured": not_measured, "goals": goals,
    }
    print_table(report)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"JSON: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
