"""OpenAI's POST /v1/audio/speech: JSON in ({model, input, voice, response_format, speed}), audio out.

wav: a whole 16-bit mono WAV file at the voice's rate (22,050 Hz); pcm: raw 16-bit little-endian mono
at 24 kHz, OpenAI's rate for it, streamed sentence by sentence as they are made. OpenAI's model and
voice names speak with Kestrel's default voice. Speaking runs in its own child process
(app/voice/synthesis/synthesizer.py), one text at a time, behind the same gate (key rules) as every
endpoint; the input is data, at most 4,096 characters, as OpenAI allows.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from enum import StrEnum

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from app.server.endpoint import guarded, read_body
from app.server.errors import BadRequest, Flavor, error_response
from app.server.fields import Body
from app.voice.resampling import StreamResampler
from app.voice.synthesis.reading import TextRefused
from app.voice.synthesis.speeches import Speeches, SpeechBusy
from app.voice.synthesis.synthesizer import MAX_SPEED, MIN_SPEED, SpokenSentence, SynthesisFailed, wav_file
from app.voice.catalog.choice import choose_voice, voice_names
from app.voice.synthesis.voices import OPENAI_SPEECH_MODELS, SpeakingVoice, VoiceError, default_voice
from app.voice.synthesis.words import synthesis_failed_words, text_refused_words
from app.voice.transcriber import FailureKind

# OpenAI's own limit on `input`.
MAX_INPUT_CHARS = 4096
PCM_RATE = 24_000
BUSY = "Kestrel is reading other texts aloud and has too many waiting. Try again in a moment."
# OpenAI's formats Kestrel does not write (it would need an encoder it does not ship).
_NOT_WRITTEN = ("mp3", "opus", "aac", "flac")


class SpeechFormat(StrEnum):
    WAV = "wav"
    PCM = "pcm"


class SpeechEndpoints:
    """The speech route over the service's Speeches (app/service/api/api_voice.py)."""

    def __init__(self, speeches: Speeches) -> None:
        self._speeches = speeches

    def routes(self) -> list[Route]:
        return [Route("/v1/audio/speech", self.speech, methods=["POST"])]

    async def speech(self, request: Request) -> Response:
        return await guarded(Flavor.OPENAI, request, lambda: self._speak(request))

    async def _speak(self, request: Request) -> Response:
        # On a worker thread: a Windows voice's id is looked up in Windows' list.
        text, voice, speed, form_of = await asyncio.to_thread(_asked, await read_body(request))
        spoken = self._speeches.spoken(text, voice, speed, MAX_INPUT_CHARS)
        try:
            first = await anext(spoken)
            if form_of is SpeechFormat.WAV:
                sentences = [first, *[sentence async for sentence in spoken]]
                return Response(wav_file(sentences), media_type="audio/wav")
        except TextRefused as refused:
            return error_response(Flavor.OPENAI, 400, text_refused_words(refused), "input")
        except SpeechBusy:
            return error_response(Flavor.OPENAI, 429, BUSY, retry_after=5)
        except VoiceError as exc:  # a catalog voice not downloaded (the client may name another); the voice packages
            # missing or changed (the server's to fix)
            return error_response(Flavor.OPENAI, 400 if getattr(voice, "repo", None) is not None else 503, str(exc),
                                  "voice")
        except SynthesisFailed as failed:
            status = 504 if failed.kind is FailureKind.TIMED_OUT else 500
            return error_response(Flavor.OPENAI, status, synthesis_failed_words(failed))
        return StreamingResponse(_pcm_stream(first, spoken), media_type="audio/pcm",
                                 headers={"X-Sample-Rate": str(PCM_RATE)})


def _asked(body: Body) -> tuple[str, SpeakingVoice, float, SpeechFormat]:
    """The text, voice, speed and format asked, or BadRequest naming the field."""
    text = body.text("input", required=True) or ""
    if len(text) > MAX_INPUT_CHARS:
        raise BadRequest(f"input is {len(text):,} characters long; at most {MAX_INPUT_CHARS:,} are read at once "
                         "(as OpenAI allows). Split the text and send the parts.", "input")
    model = (body.text("model") or "").strip()
    try:
        voice = choose_voice(body.text("voice"))
    except VoiceError as exc:
        raise BadRequest(str(exc), "voice") from exc
    if model and model not in OPENAI_SPEECH_MODELS:
        try:
            named = choose_voice(model)  # a voice's id names the model too
        except VoiceError as exc:
            raise BadRequest(f"There is no speech model {model!r}. Use one of "
                             f"{', '.join([*OPENAI_SPEECH_MODELS, *voice_names()])}.", "model") from exc
        voice = named if voice == default_voice() else voice
    speed = body.number("speed", MIN_SPEED, MAX_SPEED)
    if (body.text("stream_format") or "audio") != "audio":
        raise BadRequest("stream_format must be audio: Kestrel does not send speech as server-sent events.",
                         "stream_format")
    body.text("instructions")  # OpenAI's steering words: read for their type, not followed (one voice, one way)
    return text, voice, 1.0 if speed is None else speed, _format(body.text("response_format"))


def _format(value: str | None) -> SpeechFormat:
    try:
        return SpeechFormat(value or "wav")
    except ValueError:
        pass
    said = "Kestrel does not write {value!r} audio" if value in _NOT_WRITTEN else "{value!r} is not an audio format"
    raise BadRequest(f"{said.format(value=value)}. response_format must be one of "
                     f"{', '.join(SpeechFormat)} (16-bit PCM: wav as a file, pcm raw at {PCM_RATE:,} Hz).",
                     "response_format")


async def _pcm_stream(first: SpokenSentence, rest: AsyncGenerator[SpokenSentence, None]) -> AsyncIterator[bytes]:
    """The sentences as raw PCM at OpenAI's 24 kHz, each sent as soon as it is made. A failure after the
    first cuts the stream short (its status is sent already); a client that leaves frees the voice."""
    resampler = StreamResampler(first.sample_rate, PCM_RATE)
    try:
        yield resampler.convert(first.samples).astype("<i2").tobytes()
        async for sentence in rest:
            yield resampler.convert(sentence.samples).astype("<i2").tobytes()
    except (SynthesisFailed, VoiceError):
        return
    finally:
        await rest.aclose()
