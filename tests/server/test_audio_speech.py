"""POST /v1/audio/speech through the official openai client, on the real Piper voice, heard back by the real Whisper tiny.en."""

from __future__ import annotations

import io
import wave
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import openai
import pytest

from app.core.paths import data_paths
from app.voice.protocol import TranscribeAsk
from app.voice.speech_models import WHISPER_TINY_EN
from app.voice.synthesis.voices import JOE, voice_shipped
from app.voice.transcriber import Transcriber
from tests.helpers.speech import similarity, voice_or_skip, wav_bytes
from tests.server.helpers import KEY, FakeAnswers, loop_thread, openai_client, serving, words

AUTH = {"Authorization": f"Bearer {KEY}"}
SAID = "Please open the window. It is warm in here."


def speaking_or_skip() -> None:
    if not voice_shipped(JOE):
        pytest.skip("the voice packages are not installed (pip install 'kestrel[voice]')")


@pytest.fixture
def transcriber(kestrel_home: object) -> Iterator[Transcriber]:
    voice_or_skip()
    speaking_or_skip()
    transcriber = Transcriber(WHISPER_TINY_EN, data_paths().ensure().data / "speech")
    yield transcriber
    transcriber.close()


def test_wav_and_pcm_through_the_official_client(transcriber: Transcriber) -> None:
    with loop_thread() as thread, serving(thread, FakeAnswers()) as server:
        client = openai_client(server.address)
        wav = client.audio.speech.create(model="tts-1", voice="alloy", input=SAID, response_format="wav").read()
        with wave.open(io.BytesIO(wav)) as reader:
            assert (reader.getnchannels(), reader.getsampwidth(), reader.getframerate()) == (1, 2, 22_050)
            seconds = reader.getnframes() / reader.getframerate()
        assert 0.04 * len(SAID) < seconds < 0.15 * len(SAID)
        heard = transcriber.transcribe(TranscribeAsk(wav)).text
        assert similarity(heard, SAID) >= 0.8, heard
        with client.audio.speech.with_streaming_response.create(
                model="gpt-4o-mini-tts", voice="nova", input=SAID, response_format="pcm", speed=1.25) as streamed:
            assert streamed.headers["content-type"] == "audio/pcm"
            pcm = b"".join(streamed.iter_bytes())
        # Raw 16-bit at OpenAI's 24 kHz, a quarter faster: about 24/22.05 × 0.8 of the WAV's samples.
        assert len(pcm) % 2 == 0 and 0.7 < (len(pcm) / 2 / 24_000) / seconds < 0.95
        heard = transcriber.transcribe(TranscribeAsk(wav_bytes(pcm, rate=24_000))).text
        # Piper's noise makes each saying differ, and a quarter faster tiny.en once heard "warm and ear" (0.78) in CI;
        # a stream garbled by the resampling would be heard as nothing like the text (well under 0.5).
        assert similarity(heard, SAID) >= 0.7, heard


def test_a_remove_has_the_servers_voice_child_let_go_unless_it_is_speaking(kestrel_home: object) -> None:
    """Windows will not delete a voice's file a process holds open: Models → Speech's Remove asks the API's
    synthesizer (the service's ApiVoice, which the routes use) to end its child first."""
    speaking_or_skip()
    answers = FakeAnswers()
    speeches = answers.voice.speeches
    with loop_thread() as thread, serving(thread, answers) as server:
        client = openai_client(server.address)
        client.audio.speech.create(model="tts-1", voice="alloy", input="Hello.", response_format="wav").read()
        child = speeches.pid
        assert child is not None  # kept for the next request
        assert thread.call(answers.voice.release("en_US-amy-medium")) and speeches.pid == child  # another voice's
        assert not thread.call(_release_midway(answers, JOE.id))  # speaking with it now: not let go
        assert thread.call(answers.voice.release(JOE.id))
        assert speeches.pid is None
        wav = client.audio.speech.create(model="tts-1", voice="alloy", input="Hello.", response_format="wav").read()
        assert wav.startswith(b"RIFF") and speeches.pid is not None  # the next request starts one again
        thread.call(answers.voice.close())
        assert speeches.pid is None


async def _release_midway(answers: FakeAnswers, voice_id: str) -> bool:
    """What release() says while a text is spoken: after its first sentence of two, before the second is taken (as
    a request streaming pcm holds the voice until its last sentence is sent)."""
    spoken = answers.voice.speeches.spoken(SAID, JOE, 1.0, 4096)
    await anext(spoken)
    try:
        return await answers.voice.release(voice_id)
    finally:
        await spoken.aclose()


def test_on_windows_its_own_voices_are_listed_and_speak(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """On Windows (PyWinRT's stand-in, tests/helpers/fake_winrt), GET /v1/models lists Windows' voices, one of them
    speaks by its id, and OpenAI's voice names speak with the voice Windows chose."""
    from tests.helpers.windows_speech import IDS, fake_windows
    windows = fake_windows(monkeypatch, tmp_path)
    answers = FakeAnswers()
    with loop_thread() as thread, serving(thread, answers) as server:
        client = openai_client(server.address)
        listed = {model.id: model for model in client.models.list()}
        irina = listed["windows-irina"]
        assert (irina.type, irina.name, irina.languages) == (  # type: ignore[attr-defined]
            "text-to-speech", "Microsoft Irina - Russian (Russia)", ["ru-RU"])
        wav = client.audio.speech.create(model="tts-1", voice="windows-mark", input="Hello there. Bye.",
                                         response_format="wav").read()
        with wave.open(io.BytesIO(wav)) as reader:
            assert reader.getframerate() == 24_000  # Mark's streams' rate, read from their header
            assert reader.getnframes() / 24_000 == pytest.approx(len("Hello there.Bye.") * 0.06, abs=0.02)
        assert [entry["text"] for entry in windows.asked()][-2:] == ["Hello there.", "Bye."]
        client.audio.speech.create(model="tts-1", voice="alloy", input="Hi.", response_format="wav").read()
        assert windows.asked()[-1]["voice"] == IDS["zira"]  # the default Windows chose
        with pytest.raises(openai.BadRequestError) as refused:
            client.audio.speech.create(model="tts-1", voice="windows-hal", input="Hi.")
        assert "There is no voice 'windows-hal'" in words(refused.value)
        thread.call(answers.voice.close())


def test_bad_requests_are_refused_in_words_naming_the_field() -> None:
    speaking_or_skip()
    with loop_thread() as thread, serving(thread, FakeAnswers()) as server:
        def ask(**body: object) -> httpx.Response:
            return httpx.post(f"{server.address}/v1/audio/speech", headers=AUTH, json=body, timeout=60)

        for kind in ("mp3", "opus", "aac", "flac"):
            refused = ask(model="tts-1", voice="alloy", input="Hi.", response_format=kind)
            error = refused.json()["error"]
            assert refused.status_code == 400 and error["param"] == "response_format", refused.text
            assert f"does not write '{kind}'" in error["message"] and "wav, pcm" in error["message"]
        long = ask(model="tts-1", voice="alloy", input="word " * 820)
        assert long.status_code == 400 and long.json()["error"]["param"] == "input"
        assert "4,100 characters" in long.json()["error"]["message"] and "4,096" in long.json()["error"]["message"]
        for speed in (0.1, 4.5, "fast"):
            slow = ask(model="tts-1", voice="alloy", input="Hi.", speed=speed)
            assert slow.status_code == 400 and slow.json()["error"]["param"] == "speed", slow.text
        empty = ask(model="tts-1", voice="alloy", input=" ... ")
        assert empty.status_code == 400 and "nothing to read aloud" in empty.json()["error"]["message"]
        missing = ask(model="tts-1", voice="alloy")
        assert missing.status_code == 400 and missing.json()["error"]["param"] == "input"
        voice = ask(model="tts-1", voice="hal9000", input="Hi.")
        assert voice.status_code == 400 and JOE.id in voice.json()["error"]["message"]
        model = ask(model="tts-9", voice="alloy", input="Hi.")
        assert model.status_code == 400 and model.json()["error"]["param"] == "model"
        offered = ask(model="tts-1", voice="en_US-amy-medium", input="Hi.")  # in the catalog, not downloaded
        assert offered.status_code == 400 and offered.json()["error"]["param"] == "voice"
        assert "kestrel models get en_US-amy-medium" in offered.json()["error"]["message"]


def test_a_request_without_the_key_is_refused() -> None:
    with loop_thread() as thread, serving(thread, FakeAnswers()) as server:
        client = openai_client(server.address, key="wrong-key")
        with pytest.raises(openai.AuthenticationError) as refused:
            client.audio.speech.create(model="tts-1", voice="alloy", input="Hi.")
        assert "no valid API key" in words(refused.value)
        raw = httpx.post(f"{server.address}/v1/audio/speech", json={"model": "tts-1", "voice": "alloy", "input": "Hi."},
                         timeout=30)
        assert raw.status_code == 401


def test_a_client_that_leaves_mid_stream_frees_the_voice_for_the_next() -> None:
    speaking_or_skip()
    long = " ".join(f"This is sentence number {n} of a long text." for n in range(1, 200))[:4096]
    with loop_thread() as thread, serving(thread, FakeAnswers()) as server:
        with httpx.stream("POST", f"{server.address}/v1/audio/speech", headers=AUTH, timeout=60,
                          json={"model": "tts-1", "voice": "alloy", "input": long, "response_format": "pcm"}) as left:
            assert left.status_code == 200
            assert len(next(left.iter_bytes())) > 0  # the first sentence came before the rest was made
        # Saying the rest (about 90 sentences, over three minutes of speech) would take longer than this
        # timeout even on a fast machine: an answer within it means the left stream stopped being made.
        after = httpx.post(f"{server.address}/v1/audio/speech", headers=AUTH, timeout=15,
                           json={"model": "tts-1", "voice": "alloy", "input": "Still here."})
        assert after.status_code == 200 and after.headers["content-type"] == "audio/wav" and len(after.content) > 10_000
