"""OpenAI's POST /v1/audio/transcriptions: a multipart upload in, the transcript out in the response_format asked.

The speech model is chosen from `model` (OpenAI's names pick Kestrel's default) and `language`
(app/voice/speech_models.py); transcription runs in its own child process (app/voice/transcriber.py),
one at a time, with the same key rules as every endpoint (the gate). Bad audio is a 400 in words.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from app.server.audio_form import read_form
from app.server.errors import BadRequest, Flavor, bad_request_response, error_response
from app.voice.audio import AudioKind, AudioRefused
from app.voice.protocol import TranscribeAsk
from app.voice.catalog.choice import choose_speech_model
from app.voice.speech_models import SpeechModelError
from app.voice.transcriber import FailureKind, TranscriptionFailed
from app.voice.transcript_formats import TranscriptFormat, transcript_json, transcript_verbose, written
from app.voice.transcriptions import Transcriptions, TranscriptionsBusy
from app.voice.words import audio_refused_words, transcription_failed_words

BUSY = "Kestrel is transcribing other recordings and has too many waiting. Try again in a moment."


class AudioEndpoints:
    """The audio routes over the service's Transcriptions (app/service/api/api_voice.py)."""

    def __init__(self, transcriptions: Transcriptions) -> None:
        self._transcriptions = transcriptions

    def routes(self) -> list[Route]:
        return [Route("/v1/audio/transcriptions", self.transcriptions, methods=["POST"])]

    async def transcriptions(self, request: Request) -> Response:
        try:
            form = await read_form(request)
            if form.file_bytes is None:
                raise BadRequest("The request has no `file`: send the audio as the form's file field.", "file")
            form_of = _response_format(form.fields.get("response_format"))
            language = (form.fields.get("language") or "").strip().lower() or None
            model = choose_speech_model(form.fields.get("model") or None, language)
        except BadRequest as problem:
            return bad_request_response(Flavor.OPENAI, problem)
        except SpeechModelError as exc:
            return error_response(Flavor.OPENAI, 400, str(exc), "model")
        ask = TranscribeAsk(form.file_bytes or b"", AudioKind.FILE, language)
        try:
            transcript = await self._transcriptions.transcribe(model, ask)
        except AudioRefused as refused:
            return error_response(Flavor.OPENAI, 400, audio_refused_words(refused), "file")
        except TranscriptionsBusy:
            return error_response(Flavor.OPENAI, 429, BUSY, retry_after=5)
        except SpeechModelError as exc:  # a catalog model not downloaded (the client may name another); the voice
            # packages missing or changed (the server's to fix)
            return error_response(Flavor.OPENAI, 400 if model.repo is not None else 503, str(exc), "model")
        except TranscriptionFailed as failed:
            status = 504 if failed.kind is FailureKind.TIMED_OUT else 500
            return error_response(Flavor.OPENAI, status, transcription_failed_words(failed))
        if form_of is TranscriptFormat.JSON:
            return JSONResponse(transcript_json(transcript))
        if form_of is TranscriptFormat.VERBOSE_JSON:
            return JSONResponse(transcript_verbose(transcript))
        media = "text/vtt" if form_of is TranscriptFormat.VTT else "text/plain"
        return PlainTextResponse(written(transcript, form_of), media_type=media)


def _response_format(value: str | None) -> TranscriptFormat:
    try:
        return TranscriptFormat(value or "json")
    except ValueError:
        raise BadRequest(f"response_format must be one of {', '.join(TranscriptFormat)}, not {value!r}.",
                         "response_format") from None
