"""A multipart/form-data upload read in memory under a size cap: audio never touches the disk.

Starlette's own form parser spools a file past 1 MB to a temporary file; a recording of someone's
voice must not land on disk unasked, so the body is read here, bounded, and parsed with
python-multipart's streaming parser straight into bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect, Request

from app.server.errors import BadRequest

# OpenAI's own limit for an audio upload is 25 MB; the rest is room for the form's other fields.
MAX_AUDIO_BYTES = 25 * 1024 * 1024
MAX_FORM_BYTES = MAX_AUDIO_BYTES + 64 * 1024
MAX_FIELD_BYTES = 4096


@dataclass
class UploadedForm:
    """The form's text fields and its one file (name and bytes)."""

    fields: dict[str, str] = field(default_factory=dict)
    file_name: str | None = None
    file_bytes: bytes | None = None


def too_large() -> BadRequest:
    return BadRequest(f"The upload is larger than Kestrel takes ({MAX_AUDIO_BYTES // (1024 * 1024)} MB). "
                      "Send a shorter recording, or a compressed one (MP3, Ogg).", "file", status=413)


async def read_form(request: Request) -> UploadedForm:
    """The multipart form, or BadRequest in words (not multipart, too large, cut off)."""
    kind, options = parse_options_header(request.headers.get("content-type", ""))
    boundary = options.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise BadRequest("Send the audio as multipart/form-data with a `file` field, as OpenAI's clients do.", "file")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_FORM_BYTES:
        raise too_large()
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM_BYTES:
                raise too_large()
    except ClientDisconnect as exc:
        raise BadRequest("The upload was cut off before it ended.", "file") from exc
    return _parsed(bytes(body), boundary)


def _parsed(body: bytes, boundary: bytes) -> UploadedForm:
    form = UploadedForm()
    part: dict[str, object] = {}
    header_name = bytearray()
    header_value = bytearray()
    data = bytearray()

    def on_part_begin() -> None:
        part.clear()
        data.clear()

    def on_header_field(chunk: bytes, start: int, end: int) -> None:
        header_name.extend(chunk[start:end])

    def on_header_value(chunk: bytes, start: int, end: int) -> None:
        header_value.extend(chunk[start:end])

    def on_header_end() -> None:
        part[bytes(header_name).lower().decode("latin-1")] = bytes(header_value)
        header_name.clear()
        header_value.clear()

    def on_part_data(chunk: bytes, start: int, end: int) -> None:
        data.extend(chunk[start:end])

    def on_part_end() -> None:
        _keep(form, part, bytes(data))

    parser = MultipartParser(boundary, {"on_part_begin": on_part_begin, "on_header_field": on_header_field,
                                        "on_header_value": on_header_value, "on_header_end": on_header_end,
                                        "on_part_data": on_part_data, "on_part_end": on_part_end})
    try:
        parser.write(body)
        parser.finalize()
    except BadRequest:
        raise
    except Exception as exc:  # python-multipart's MultipartParseError and kin: a malformed body
        raise BadRequest("The upload is not a well-formed multipart form.", "file") from exc
    return form


def _keep(form: UploadedForm, part: dict[str, object], data: bytes) -> None:
    disposition = part.get("content-disposition")
    _, options = parse_options_header(disposition if isinstance(disposition, bytes) else b"")
    name = options.get(b"name", b"").decode("utf-8", "replace")
    if b"filename" in options or name == "file":
        if form.file_bytes is not None:
            raise BadRequest("Send one audio file per request.", "file")
        form.file_name = options.get(b"filename", b"").decode("utf-8", "replace")
        form.file_bytes = data
        return
    if len(data) > MAX_FIELD_BYTES:
        raise BadRequest(f"The field {name!r} is too long.", name)
    form.fields[name] = data.decode("utf-8", "replace")
