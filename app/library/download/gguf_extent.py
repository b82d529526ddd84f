"""Where a .gguf download must end, read from the file's own header as its bytes arrive.

A server that states no size, or a false one, can send without end. A GGUF file says how
long it is: its tensor data starts at the first aligned offset after the header and ends
with the last tensor, padded to the alignment (llama.cpp and gguf-py pad every tensor,
the last one too). The header is read in whatever pieces the body comes in, keeping
only a key or a tensor name at a time, so a vocabulary of 262,000 strings costs no
memory and each byte is looked at once. Its checks are those of gguf_header and
gguf_info: a header refused here is one the model check refuses too (it checks more).
"""

from __future__ import annotations

import struct
from collections.abc import Generator

from app.core.units import human_size
from app.library.model_files.gguf_header import (MAX_ARRAY_LENGTH, MAX_DIMS, MAX_ELEMENTS, MAX_NAME_BYTES, MAX_STRING_BYTES,
                                     Corrupt, count_of, padded, quoted)
from app.library.model_files.ggml_types import GGML_TYPES
from app.library.model_files.gguf_info import (DEFAULT_ALIGNMENT, GGUF_MAGIC, MAX_COUNT, describe_foreign,
                                   version_detail)

# What the header reader asks for: so many bytes, so many bytes passed over, or so many
# strings passed over (a vocabulary: each a length, then its bytes).
_READ, _SKIP, _STRINGS = 0, 1, 2
_Request = tuple[int, int]
_Steps = Generator[_Request, bytes, tuple[int, int]]

# GGUF value types: id -> bytes of one value; 8 (string) and 9 (array) are read apart.
_STRING, _ARRAY = 8, 9
_VALUE_BYTES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_INTEGER_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 10: "<Q", 11: "<q"}
_HEAD_BYTES = 16  # what describe_foreign looks at


class _Unusable(Exception):
    """The bytes are no GGUF model this Kestrel can use; the message says why."""


class GgufExtent:
    """Feed it a .gguf download's bytes in order, from the first: end is where the file
    ends once its header has all arrived; problem says why the bytes are no GGUF model
    Kestrel can use (not GGUF, another version, a damaged header, or a header still
    going on past header_limit). At most one of them is ever set, and feeding after
    that does nothing."""

    def __init__(self, header_limit: int) -> None:
        self.end: int | None = None
        self.problem: str | None = None
        self._limit = header_limit
        self._fed = 0
        self._head = b""
        self._pending = b""  # arrived and not yet read, from _pos on
        self._pos = 0
        self._offset = 0  # the file offset of _pending[_pos]
        self._strings_left = 0
        self._string_rest = 0
        self._steps = _header()
        self._want = next(self._steps)

    @property
    def done(self) -> bool:
        return self.end is not None or self.problem is not None

    def feed(self, data: bytes) -> None:
        if self.done or not data:
            return
        self._fed += len(data)
        if len(self._head) < _HEAD_BYTES:
            self._head += data[:_HEAD_BYTES - len(self._head)]
        self._pending = self._pending[self._pos:] + data
        self._pos = 0
        try:
            self._advance()
        except _Unusable as unusable:
            self.problem = self._words(str(unusable))
        except Corrupt as corrupt:
            self.problem = f"its header is damaged ({corrupt})"
        if not self.done and self._fed > self._limit:
            self.problem = (f"its header goes on past the first {human_size(self._limit)}, and no model's "
                            f"header is that long")
        if self.done:
            self._pending, self._pos = b"", 0

    def _words(self, reason: str) -> str:
        return reason + describe_foreign(self._head) if reason == _NOT_GGUF else reason

    def _advance(self) -> None:
        """Answer the header reader's requests while the bytes that arrived allow."""
        while True:
            kind, count = self._want
            available = len(self._pending) - self._pos
            if kind == _READ:
                if available < count:
                    return
                value = self._pending[self._pos:self._pos + count]
                self._take(count)
            elif kind == _SKIP:
                taken = min(count, available)
                self._take(taken)
                if taken < count:
                    self._want = (_SKIP, count - taken)
                    return
                value = b""
            else:
                if not self._pass_strings():
                    return
                value = b""
            if not self._answer(value):
                return

    def _take(self, count: int) -> None:
        self._pos += count
        self._offset += count

    def _answer(self, value: bytes) -> bool:
        """Give the reader what it asked for; False once the header has ended."""
        try:
            self._want = self._steps.send(value)
        except StopIteration as finished:
            alignment, data_length = finished.value
            self.end = padded(self._offset, alignment) + data_length
            return False
        if self._want[0] == _STRINGS:
            self._strings_left, self._string_rest = self._want[1], 0
        return True

    def _pass_strings(self) -> bool:
        """Pass over the strings of an array; True once the last has gone by."""
        pending, pos, end = self._pending, self._pos, len(self._pending)
        left, rest = self._strings_left, self._string_rest
        try:
            while True:
                if rest:
                    taken = min(rest, end - pos)
                    pos, rest = pos + taken, rest - taken
                    if rest:
                        return False
                if not left:
                    return True
                if end - pos < 8:
                    return False
                (rest,) = struct.unpack_from("<Q", pending, pos)
                if rest > MAX_STRING_BYTES:
                    raise Corrupt(f"a text claims {count_of(rest, 'byte')}")
                pos, left = pos + 8, left - 1
        finally:
            self._offset += pos - self._pos
            self._pos, self._strings_left, self._string_rest = pos, left, rest


_NOT_GGUF = 'it does not start with the letters "GGUF" that every GGUF model starts with'


def _header() -> _Steps:
    """The header, request by request: returns (alignment, the padded length of the data)."""
    if (yield (_READ, 4)) != GGUF_MAGIC:
        raise _Unusable(_NOT_GGUF)
    version = _unsigned((yield (_READ, 4)))
    detail = version_detail(version)
    if detail is not None:
        raise _Unusable(detail)
    tensor_count, kv_count = struct.unpack("<QQ", (yield (_READ, 16)))
    if tensor_count > MAX_COUNT or kv_count > MAX_COUNT:
        raise Corrupt(f"it claims {count_of(tensor_count, 'tensor')} and {count_of(kv_count, 'setting')}")
    alignment: object = DEFAULT_ALIGNMENT
    for _ in range(kv_count):
        key = yield from _name()
        value_type = _unsigned((yield (_READ, 4)))
        if key == "general.alignment" and value_type in _INTEGER_FORMATS:
            (alignment,) = struct.unpack(_INTEGER_FORMATS[value_type], (yield (_READ, _VALUE_BYTES[value_type])))
        else:
            if key == "general.alignment":
                alignment = None  # a text, a fraction or a list: gguf_info calls that damaged too
            yield from _pass_value(key, value_type)
    if type(alignment) is not int or alignment <= 0 or alignment & (alignment - 1):
        raise Corrupt(f"its data alignment {alignment if type(alignment) is int else '(not a number)'} "
                      f"is not a power of two")
    expected = 0
    for _ in range(tensor_count):
        expected = yield from _tensor(alignment, expected)
    return alignment, expected


def _name() -> Generator[_Request, bytes, str]:
    length = _unsigned((yield (_READ, 8)))
    if length > MAX_NAME_BYTES:
        raise Corrupt(f"a name claims {count_of(length, 'byte')}")
    return (yield (_READ, length)).decode("utf-8", errors="replace")


def _pass_value(key: str, value_type: int) -> Generator[_Request, bytes, None]:
    if value_type in _VALUE_BYTES:
        yield (_SKIP, _VALUE_BYTES[value_type])
    elif value_type == _STRING:
        length = _unsigned((yield (_READ, 8)))
        if length > MAX_STRING_BYTES:
            raise Corrupt(f"a text claims {count_of(length, 'byte')}")
        yield (_SKIP, length)
    elif value_type == _ARRAY:
        element_type, length = struct.unpack("<IQ", (yield (_READ, 12)))
        if element_type not in _VALUE_BYTES and element_type != _STRING:
            raise Corrupt(f"setting {quoted(key)} has the unknown value type {element_type}")
        if length > MAX_ARRAY_LENGTH:
            raise Corrupt(f"setting {quoted(key)} claims {count_of(length, 'value')}")
        yield (_STRINGS, length) if element_type == _STRING else (_SKIP, length * _VALUE_BYTES[element_type])
    else:
        raise Corrupt(f"setting {quoted(key)} has the unknown value type {value_type}")


def _tensor(alignment: int, expected: int) -> Generator[_Request, bytes, int]:
    """One tensor's entry, which must start where the one before it ended; returns where
    the next one starts (this one's end, padded)."""
    name = yield from _name()
    dims = _unsigned((yield (_READ, 4)))
    if dims > MAX_DIMS:
        raise Corrupt(f"tensor {quoted(name)} claims {count_of(dims, 'dimension')}")
    shape = struct.unpack(f"<{dims}Q", (yield (_READ, 8 * dims))) if dims else ()
    type_id, offset = struct.unpack("<IQ", (yield (_READ, 12)))
    if type_id not in GGML_TYPES:
        raise _Unusable(f"it stores its weights in a number format (ggml type {type_id}) that this "
                        f"Kestrel does not know")
    _, block_size, block_bytes = GGML_TYPES[type_id]
    elements = 1
    for extent in shape:
        elements *= extent
    if elements > MAX_ELEMENTS:
        raise Corrupt(f"tensor {quoted(name)} claims an impossible size")
    if shape and shape[0] % block_size:
        raise Corrupt(f"tensor {quoted(name)} does not fit its number format")
    if offset != expected:
        raise Corrupt(f"tensor {quoted(name)} is not where the file's index says it is")
    return padded(offset + elements // block_size * block_bytes, alignment)


def _unsigned(raw: bytes) -> int:
    value: int = int.from_bytes(raw, "little")
    return value
