"""WebM with Opus (what browsers' MediaRecorder and many voice-note apps write) moved into an Ogg container,
unchanged, so that libsndfile decodes it: the installed app carries libsndfile, which reads Ogg Opus, and not
PyAV, whose FFmpeg is GPL (app/voice/audio.py). No sample is decoded here; the Opus packets are copied as they are.

WebM is Matroska: EBML elements, each an id and a size (both variable-length integers) and its data. A linear
walk reads them, going into the few containers that lead to the track and the blocks (Segment, Tracks,
TrackEntry, Audio, Cluster, BlockGroup) and over everything else, so a container of unknown size (a recording
still being written, as MediaRecorder streams it) reads like any other. What comes out is RFC 7845's Ogg Opus:
the track's OpusHead, an OpusTags, then one packet per page with its granule position (48 kHz samples, counted
from each packet's TOC byte, RFC 6716 section 3.1). Bounded by the input: every size is checked against the
bytes that are there.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

EBML_MAGIC = b"\x1a\x45\xdf\xa3"
_SEGMENT, _CLUSTER, _TRACKS, _TRACK_ENTRY, _AUDIO, _BLOCK_GROUP = (0x18538067, 0x1F43B675, 0x1654AE6B, 0xAE, 0xE1,
                                                                   0xA0)
_CONTAINERS = {_SEGMENT, _CLUSTER, _TRACKS, _TRACK_ENTRY, _AUDIO, _BLOCK_GROUP}
_TRACK_NUMBER, _TRACK_TYPE, _CODEC_ID, _CODEC_PRIVATE, _CODEC_DELAY = 0xD7, 0x83, 0x86, 0x63A2, 0x56AA
_CHANNELS, _SAMPLING = 0x9F, 0xB5
_SIMPLE_BLOCK, _BLOCK = 0xA3, 0xA1
_AUDIO_TRACK = 2
_OPUS = "A_OPUS"
_UNKNOWN = -1
_SERIAL = 0x4B455354  # "KEST": the one stream's serial number
_VENDOR = b"Kestrel (from WebM)"


class NotWebmOpus(Exception):
    """The bytes are no WebM Kestrel can move: not Matroska, no audio track, a codec other than Opus (codec names
    it), or damaged. str() says which."""

    def __init__(self, reason: str, codec: str = "") -> None:
        super().__init__(reason)
        self.codec = codec


@dataclass
class _Track:
    number: int = 0
    kind: int = 0
    codec: str = ""
    private: bytes = b""
    channels: int = 1
    rate: float = 48_000.0
    delay_ns: int = 0


def is_webm(data: bytes) -> bool:
    return data[:4] == EBML_MAGIC


def webm_opus_to_ogg(data: bytes) -> bytes:
    """The WebM's first audio track as an Ogg Opus file; NotWebmOpus when it is not one."""
    if not is_webm(data):
        raise NotWebmOpus("not a Matroska/WebM file")
    tracks: list[_Track] = []
    blocks: list[tuple[int, bytes]] = []  # (track number, block payload after the header: the laced frames)
    at = 0
    while at < len(data):
        element, size, start = _header(data, at)
        if element in _CONTAINERS:
            if element == _TRACK_ENTRY:
                tracks.append(_Track())
            at = start  # into it: its children follow (its size may be unknown)
            continue
        end = len(data) if size is None else start + size
        if end > len(data):
            if element in (_SIMPLE_BLOCK, _BLOCK):
                break  # a recording cut off in its last block: what came before is kept
            end = len(data)
        body = data[start:end]
        if tracks:
            _track_field(tracks[-1], element, body)
        if element in (_SIMPLE_BLOCK, _BLOCK) and body:
            number, used = _vint(body, 0)
            blocks.append((number, body[used:]))
        at = end
    track = next((t for t in tracks if t.kind == _AUDIO_TRACK or (t.kind == 0 and t.codec.startswith("A_"))), None)
    if track is None:
        raise NotWebmOpus("no audio track")
    if track.codec != _OPUS:
        raise NotWebmOpus(f"audio in {track.codec or 'an unnamed codec'}", track.codec)
    packets = [frame for number, body in blocks if number == track.number for frame in _frames(body)]
    if not packets:
        raise NotWebmOpus("no audio in the track")
    return _ogg(_opus_head(track), packets)


def _header(data: bytes, at: int) -> tuple[int, int | None, int]:
    """An element's id (its marker bits kept, as Matroska's tables write ids), its size (None: unknown) and where
    its data starts."""
    first = data[at] if at < len(data) else 0
    length = _vint_length(first)
    if length > 4 or at + length > len(data):
        raise NotWebmOpus(f"a damaged element at byte {at}")
    element = int.from_bytes(data[at:at + length], "big")
    size, used = _vint(data, at + length, unknown_ok=True)
    return element, None if size == _UNKNOWN else size, at + length + used


def _vint_length(first: int) -> int:
    for length in range(1, 9):
        if first & (0x80 >> (length - 1)):
            return length
    return 9


def _vint(data: bytes, at: int, unknown_ok: bool = False) -> tuple[int, int]:
    """A variable-length integer's value (its marker bit removed) and length; all ones is "unknown" (_UNKNOWN),
    which only an element's size may be."""
    if at >= len(data):
        raise NotWebmOpus("the file ends inside an element's header")
    length = _vint_length(data[at])
    if length > 8 or at + length > len(data):
        raise NotWebmOpus(f"a damaged size at byte {at}")
    value = data[at] & (0xFF >> length)
    for byte in data[at + 1:at + length]:
        value = (value << 8) | byte
    if value == (1 << (7 * length)) - 1:
        if not unknown_ok:
            raise NotWebmOpus(f"an unknown size where none may be, at byte {at}")
        return _UNKNOWN, length
    return value, length


def _track_field(track: _Track, element: int, body: bytes) -> None:
    if element == _TRACK_NUMBER:
        track.number = int.from_bytes(body, "big")
    elif element == _TRACK_TYPE:
        track.kind = int.from_bytes(body, "big")
    elif element == _CODEC_ID:
        track.codec = body.decode("ascii", "replace").rstrip("\x00")
    elif element == _CODEC_PRIVATE:
        track.private = body
    elif element == _CHANNELS:
        track.channels = int.from_bytes(body, "big")
    elif element == _SAMPLING and len(body) in (4, 8):
        track.rate = struct.unpack(">f" if len(body) == 4 else ">d", body)[0]
    elif element == _CODEC_DELAY:
        track.delay_ns = int.from_bytes(body, "big")


def _frames(body: bytes) -> list[bytes]:
    """A block's frames: after the 16-bit timecode and the flags, one frame, or several laced (Xiph, fixed or
    EBML lacing, the flags' bits 1-2)."""
    if len(body) < 3:
        return []
    lacing = (body[2] >> 1) & 3
    rest = body[3:]
    if lacing == 0:
        return [rest]
    if not rest:
        raise NotWebmOpus("a laced block with no frame count")
    count = rest[0] + 1
    at = 1
    sizes: list[int] = []
    if lacing == 1:  # Xiph: each size as a run of 255s and a last byte
        for _ in range(count - 1):
            size = 0
            while True:
                if at >= len(rest):
                    raise NotWebmOpus("a block's lacing runs past its end")
                size += rest[at]
                at += 1
                if rest[at - 1] != 255:
                    break
            sizes.append(size)
    elif lacing == 3:  # EBML: the first size, then signed differences
        size, used = _vint(rest, at)
        at += used
        sizes.append(size)
        for _ in range(count - 2):
            raw, used = _vint(rest, at)
            at += used
            size += raw - ((1 << (7 * used - 1)) - 1)
            sizes.append(size)
    else:  # fixed: equal parts
        if (len(rest) - at) % count:
            raise NotWebmOpus("a block's equal frames do not divide it")
        return [rest[at + n * ((len(rest) - at) // count):at + (n + 1) * ((len(rest) - at) // count)]
                for n in range(count)]
    if any(size < 0 for size in sizes) or at + sum(sizes) > len(rest):
        raise NotWebmOpus("a block's frames run past its end")
    frames = []
    for size in sizes:
        frames.append(rest[at:at + size])
        at += size
    frames.append(rest[at:])
    return frames


def _opus_head(track: _Track) -> bytes:
    """The track's OpusHead (its CodecPrivate), or one made from its channels, rate and delay."""
    if track.private[:8] == b"OpusHead" and len(track.private) >= 19:
        return track.private
    if not 1 <= track.channels <= 2:
        raise NotWebmOpus(f"Opus with {track.channels} channels and no OpusHead")
    pre_skip = track.delay_ns * 48_000 // 1_000_000_000
    return b"OpusHead" + struct.pack("<BBHIhB", 1, track.channels, pre_skip, int(track.rate), 0, 0)


def packet_samples(packet: bytes) -> int:
    """How many 48 kHz samples an Opus packet holds (RFC 6716 section 3.1: its TOC byte and, for code 3, the
    frame count)."""
    if not packet:
        return 0
    config = packet[0] >> 3
    if config < 12:
        tenths = (100, 200, 400, 600)[config % 4]  # SILK: 10, 20, 40, 60 ms
    elif config < 16:
        tenths = (100, 200)[config % 2]  # hybrid: 10, 20 ms
    else:
        tenths = (25, 50, 100, 200)[config % 4]  # CELT: 2.5, 5, 10, 20 ms
    code = packet[0] & 3
    frames = 1 if code == 0 else 2 if code in (1, 2) else (packet[1] & 0x3F if len(packet) > 1 else 0)
    return frames * tenths * 48 // 10


def _ogg(head: bytes, packets: list[bytes]) -> bytes:
    tags = b"OpusTags" + struct.pack("<I", len(_VENDOR)) + _VENDOR + struct.pack("<I", 0)
    pages = [_page(head, 0, 0, 0x02), _page(tags, 0, 1, 0)]
    granule = struct.unpack("<H", head[10:12])[0]  # the pre-skip counts in the granule positions
    for number, packet in enumerate(packets):
        granule += packet_samples(packet)
        last = number == len(packets) - 1
        pages.append(_page(packet, granule, number + 2, 0x04 if last else 0))
    return b"".join(pages)


def _page(packet: bytes, granule: int, sequence: int, flags: int) -> bytes:
    """One Ogg page holding one whole packet (an Opus packet is at most 61,440 bytes: under 255 segments)."""
    lacing = bytes([255] * (len(packet) // 255) + [len(packet) % 255])
    if len(lacing) > 255:
        raise NotWebmOpus("an Opus packet too big for one Ogg page")
    header = struct.pack("<4sBBqIIIB", b"OggS", 0, flags, granule, _SERIAL, sequence, 0, len(lacing)) + lacing
    page = header + packet
    crc = _crc(page)
    return page[:22] + struct.pack("<I", crc) + page[26:]


def _crc_table() -> list[int]:
    table = []
    for byte in range(256):
        value = byte << 24
        for _ in range(8):
            value = ((value << 1) ^ 0x04C11DB7) if value & 0x80000000 else value << 1
        table.append(value & 0xFFFFFFFF)
    return table


_CRC_TABLE = _crc_table()


def _crc(data: bytes) -> int:
    """Ogg's CRC-32: polynomial 0x04C11DB7, not reflected, starting at 0."""
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ _CRC_TABLE[((crc >> 24) ^ byte) & 0xFF]
    return crc
