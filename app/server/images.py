"""Images in a request's content: inline base64 only, bounded before decoding; the server never fetches an address.

Each image is decoded here and handed to the service as the request sent it (ApiImage); the
service checks it in the image check's child process before the model is given it. A URL
that names a place (http, https, a file) is refused: answering a request must never open a
connection or read a file the request chose.
"""

from __future__ import annotations

import base64
import binascii

from app.server.errors import BadRequest
from app.server.fields import Body
from app.service.api.api_types import ApiImage

# As the engine takes them (app/engine/backends/llama/image_prompt.py MAX_IMAGES, MAX_IMAGE_BYTES; a test holds
# them equal): past these the engine would refuse the prompt, so the request is refused here,
# naming the part, before anything is decoded or checked.
MAX_IMAGES = 16
MAX_IMAGE_BYTES = 20_000_000
# The longest base64 text that can decode to MAX_IMAGE_BYTES: anything longer is refused unread.
MAX_BASE64_CHARS = 4 * -(-MAX_IMAGE_BYTES // 3)
DATA_URL = "a data: URL (base64)"


def no_fetch(inline: str = DATA_URL) -> str:
    """Why an image's address is refused; inline: how this API sends an image inline."""
    return f"Kestrel does not fetch addresses for a request: send the image inline as {inline}."


def no_files(inline: str = DATA_URL) -> str:
    return f"Kestrel keeps no uploaded files: send the image inline as {inline}."

_SHOWN_CHARS = 40


class RequestImages:
    """A request's images in the order its parts are read. read() decodes one part's image and
    holds it until belong_to() says which of the request's turns it is in (the turn's index in
    the messages the service is given)."""

    def __init__(self) -> None:
        self.found: list[ApiImage] = []
        self._held: list[tuple[str, bytes]] = []

    def from_url(self, part: Body, key: str) -> None:
        """An image given as part[key], a data: URL (OpenAI's image_url)."""
        url = part.text(key, required=True) or ""
        self._take(part.name(key), _base64_of(url, part.name(key)))

    def from_base64(self, part: Body, key: str) -> None:
        """An image given as part[key], base64 text alone (Anthropic's source.data)."""
        self._take(part.name(key), part.text(key, required=True) or "")

    @property
    def holding(self) -> bool:
        """Images read that belong to no turn yet (the message being read has some)."""
        return bool(self._held)

    def belong_to(self, turn: int) -> None:
        self.found.extend(ApiImage(turn, where, data) for where, data in self._held)
        self._held.clear()

    def _take(self, where: str, encoded: str) -> None:
        if len(self.found) + len(self._held) >= MAX_IMAGES:
            raise BadRequest(f"{where} is image {MAX_IMAGES + 1} of this request; a request takes at most "
                             f"{MAX_IMAGES} images. Send fewer, and ask about the rest in another request.", where)
        self._held.append((where, _decoded(encoded, where)))


def _base64_of(url: str, where: str) -> str:
    """The base64 text of a data: URL, or BadRequest saying what the URL is instead."""
    scheme, colon, _ = url.partition(":")
    if not colon or scheme.lower() != "data":
        shown = url if len(url) <= _SHOWN_CHARS else url[:_SHOWN_CHARS] + "…"
        if colon and scheme.lower() in ("http", "https", "ftp", "file"):
            raise BadRequest(f"{where} is an address ({shown!r}). {no_fetch()}", where)
        raise BadRequest(f"{where} must be a data: URL (data:image/png;base64,…), not {shown!r}.", where)
    head, comma, encoded = url.partition(",")
    if not comma:
        raise BadRequest(f"{where} is a data: URL without a comma before its data (data:image/png;base64,…).",
                         where)
    kind, *options = head[len("data:"):].split(";")
    if kind and not kind.strip().lower().startswith("image/"):
        raise BadRequest(f"{where} is a data: URL of {kind.strip()[:_SHOWN_CHARS]!r}, not of an image: send a PNG, "
                         "JPEG, WebP, GIF or BMP image.", where)
    if "base64" not in (option.strip().lower() for option in options):
        raise BadRequest(f"{where} must hold its image as base64 (data:image/png;base64,…).", where)
    return encoded


def _decoded(encoded: str, where: str) -> bytes:
    """The image's bytes: the text's length is checked before it is decoded, and every character."""
    if len(encoded) > MAX_BASE64_CHARS:
        raise BadRequest(f"{where} holds an image of about {len(encoded) * 3 / 4 / 1e6:,.1f} MB; each image may be "
                         f"at most {MAX_IMAGE_BYTES / 1e6:g} MB. Send a smaller copy.", where)
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest(f"{where} is not valid base64: encode the image's bytes as standard base64 (A-Z, a-z, 0-9, "
                         "+ and /, padded with =), with no spaces or line breaks.", where) from None
    if not data:
        raise BadRequest(f"{where} holds no image: its data is empty.", where)
    if len(data) > MAX_IMAGE_BYTES:
        raise BadRequest(f"{where} holds an image of {len(data) / 1e6:,.1f} MB; each image may be at most "
                         f"{MAX_IMAGE_BYTES / 1e6:g} MB. Send a smaller copy.", where)
    return data
