"""POST /v1/audio/transcriptions through the official openai client, on the real Whisper model and a real recording."""

from __future__ import annotations

import httpx2 as httpx
import openai
import pytest

from tests.helpers.speech import BECKETT, BECKETT_SAID, similarity, voice_or_skip
from tests.server.helpers import KEY, FakeAnswers, loop_thread, openai_client, serving, words

AUTH = {"Authorization": f"Bearer {KEY}"}


def test_every_response_format_through_the_official_client() -> None:
    voice_or_skip()
    with loop_thread() as thread, serving(thread, FakeAnswers()) as server:
        client = openai_client(server.address)
        with BECKETT.open("rb") as audio:
            plain = client.audio.transcriptions.create(model="whisper-1", file=audio)
        assert similarity(plain.text, BECKETT_SAID) >= 0.8, plain.text
        verbose = client.audio.transcriptions.create(model="whisper-1", file=BECKETT, language="en",
                                                     response_format="verbose_json")
        assert verbose.language == "en" and verbose.duration == pytest.approx(9.963, abs=0.01)
        assert verbose.segments and verbose.segments[0].start == 0.0 and verbose.text == plain.text
        text = client.audio.transcriptions.create(model="whisper-1", file=BECKETT, response_format="text")
        assert text == plain.text + "\n"
        srt = client.audio.transcriptions.create(model="whisper-1", file=BECKETT, response_format="srt")
        assert srt.startswith("1\n00:00:00,000 --> ")
        vtt = client.audio.transcriptions.create(model="whisper-1", file=BECKETT, response_format="vtt")
        assert vtt.startswith("WEBVTT\n\n00:00:00.000 --> ")


def test_bad_audio_and_bad_fields_are_refused_in_words() -> None:
    voice_or_skip()
    with loop_thread() as thread, serving(thread, FakeAnswers()) as server:
        client = openai_client(server.address)
        with pytest.raises(openai.BadRequestError) as not_audio:
            client.audio.transcriptions.create(model="whisper-1", file=("notes.wav", b"name,age\nada,36\n" * 100))
        assert "could not read this file as audio" in words(not_audio.value)
        assert not_audio.value.body["param"] == "file"  # type: ignore[index]
        with pytest.raises(openai.BadRequestError) as empty:
            client.audio.transcriptions.create(model="whisper-1", file=("empty.wav", b""))
        assert "empty" in words(empty.value)
        with pytest.raises(openai.BadRequestError) as unknown:
            client.audio.transcriptions.create(model="whisper-large-v9", file=BECKETT)
        assert "no speech model 'whisper-large-v9'" in words(unknown.value)
        with pytest.raises(openai.BadRequestError) as english_only:
            client.audio.transcriptions.create(model="whisper-tiny.en", file=BECKETT, language="fr")
        assert "English only" in words(english_only.value)
        wrong_format = httpx.post(f"{server.address}/v1/audio/transcriptions", headers=AUTH, timeout=30,
                                  files={"file": ("a.wav", BECKETT.read_bytes())},
                                  data={"model": "whisper-1", "response_format": "mp3"})
        assert wrong_format.status_code == 400 and wrong_format.json()["error"]["param"] == "response_format"
        no_file = httpx.post(f"{server.address}/v1/audio/transcriptions", headers=AUTH, timeout=30,
                             files={"model": (None, "whisper-1")})
        assert no_file.status_code == 400 and "no `file`" in no_file.json()["error"]["message"]
        as_json = httpx.post(f"{server.address}/v1/audio/transcriptions", headers=AUTH, timeout=30,
                             json={"model": "whisper-1", "file": "aGVsbG8="})
        assert as_json.status_code == 400 and "multipart/form-data" in as_json.json()["error"]["message"]


def test_an_upload_past_the_limit_is_refused_before_it_is_read_whole() -> None:
    with loop_thread() as thread, serving(thread, FakeAnswers()) as server:
        client = openai_client(server.address)
        with pytest.raises(openai.APIStatusError) as too_large:
            client.audio.transcriptions.create(model="whisper-1", file=("long.wav", b"\0" * (26 * 1024 * 1024)))
        assert too_large.value.status_code == 413 and "larger than Kestrel takes (25 MB)" in words(too_large.value)


def test_a_request_without_the_key_is_refused() -> None:
    with loop_thread() as thread, serving(thread, FakeAnswers()) as server:
        client = openai_client(server.address, key="wrong-key")
        with pytest.raises(openai.AuthenticationError):
            client.audio.transcriptions.create(model="whisper-1", file=BECKETT)


def test_the_models_list_has_the_speech_models_and_voices_here_and_a_catalog_one_not_yet_is_a_400() -> None:
    """GET /v1/models lists, after the chat models, the speech models and voices that are here (as OpenAI lists
    whisper-1 and tts-1), typed so that nobody takes them for chat models; a catalog model not downloaded is named
    with where to get it."""
    voice_or_skip()
    with loop_thread() as thread, serving(thread, FakeAnswers()) as server:
        client = openai_client(server.address)
        listed = {model.id: model for model in client.models.list()}
        assert listed["whisper-tiny.en"].type == "speech-to-text"  # type: ignore[attr-defined]
        assert listed["whisper-base"].languages == ["*"]  # type: ignore[attr-defined]
        assert listed["en_US-joe-medium"].type == "text-to-speech"  # type: ignore[attr-defined]
        assert "whisper-small" not in listed and "en_US-amy-medium" not in listed  # offered, not downloaded
        assert client.models.retrieve("whisper-tiny.en").owned_by == "kestrel"
        with pytest.raises(openai.BadRequestError) as not_here:
            client.audio.transcriptions.create(model="whisper-small", file=BECKETT)
        assert "not downloaded" in words(not_here.value) and "kestrel models get whisper-small" in words(not_here.value)
