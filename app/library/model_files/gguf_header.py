"""The low level of reading a GGUF header: values, tensor entries and the limits that mark a damaged file."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, BinaryIO, Mapping

from app.library.model_files.ggml_types import GGML_TYPES

# GGUF metadata value types: id -> struct format of one value (string and array are
# variable-sized and handled apart).
_STRING, _ARRAY = 8, 9
_SCALAR_FORMATS: Mapping[int, str] = MappingProxyType({
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
    10: "<Q", 11: "<q", 12: "<d",
})
MAX_DIMS = 4  # GGML_MAX_DIMS
# Limits no real model comes near; a header beyond them is damaged, and we say so
# instead of trying to allocate or skip that much.
MAX_ARRAY_LENGTH = 1 << 28
MAX_STRING_BYTES = 1 << 28
MAX_NAME_BYTES = 1 << 16
MAX_ELEMENTS = 1 << 50
# Number arrays up to this length and texts up to this size (chat templates run to
# tens of KB) are kept in metadata; bigger values, and all string arrays such as the
# vocabulary, are skipped and summarised as GgufSkipped.
_KEPT_ARRAY_LENGTH = 64
_KEPT_STRING_BYTES = 1 << 20
_READ_CHUNK = 1 << 20
# How much of a name from a damaged header a message quotes.
_EXCERPT_CHARS = 40


@dataclass(frozen=True)
class GgufSkipped:
    """A metadata value too big to keep, such as the vocabulary: its type and length.

    type_name is "array[string]", "array[float32]" and so on, or "string" for a very
    long text; length counts elements, or bytes for a text.
    """

    type_name: str
    length: int


class EndOfFile(Exception):
    """The header asked for bytes past the end of the file."""


class Corrupt(Exception):
    """The header holds a value no valid file has; the message says which."""


class UnknownTensorType(Exception):
    """A tensor uses a ggml number format this table does not know (dropped or too new)."""

    def __init__(self, type_id: int) -> None:
        super().__init__(type_id)
        self.type_id = type_id


def read_value(reader: HeaderReader, key: str) -> object:
    value_type = reader.uint("<I")
    scalar_format = _SCALAR_FORMATS.get(value_type)
    if scalar_format is not None:
        return reader.scalar(scalar_format)
    if value_type == _STRING:
        return reader.text_value()
    if value_type == _ARRAY:
        return _read_array(reader, key)
    raise Corrupt(f"setting {quoted(key)} has the unknown value type {value_type}")


def _read_array(reader: HeaderReader, key: str) -> tuple[object, ...] | GgufSkipped:
    element_type, length = reader.uint("<I"), reader.uint("<Q")
    # llama.cpp refuses arrays of arrays too, so there is nothing to skip them for.
    if element_type not in _SCALAR_FORMATS and element_type != _STRING:
        raise Corrupt(f"setting {quoted(key)} has the unknown value type {element_type}")
    if length > MAX_ARRAY_LENGTH:
        raise Corrupt(f"setting {quoted(key)} claims {count_of(length, 'value')}")
    element_format = _SCALAR_FORMATS.get(element_type)
    if element_format is None:
        reader.skip_strings(length)
    elif length <= _KEPT_ARRAY_LENGTH:
        return tuple(reader.scalar(element_format) for _ in range(length))
    else:
        reader.skip(length * struct.calcsize(element_format))
    return GgufSkipped(f"array[{_type_name(element_type)}]", length)


def _type_name(value_type: int) -> str:
    names = {_STRING: "string", 6: "float32", 12: "float64", 7: "bool"}
    if value_type in names:
        return names[value_type]
    fmt = _SCALAR_FORMATS[value_type]
    signed = "int" if fmt[1].islower() else "uint"
    return f"{signed}{8 * struct.calcsize(fmt)}"


def padded(offset: int, alignment: int) -> int:
    return -(-offset // alignment) * alignment


def read_tensor_info(reader: HeaderReader) -> tuple[str, int, int, int, str]:
    """Read one tensor description: its name, data offset, data size in bytes, elements and number format."""
    name = reader.string()
    n_dims = reader.uint("<I")
    if n_dims > MAX_DIMS:
        raise Corrupt(f"tensor {quoted(name)} claims {count_of(n_dims, 'dimension')}")
    shape = [reader.uint("<Q") for _ in range(n_dims)]
    type_id, offset = reader.uint("<I"), reader.uint("<Q")
    if type_id not in GGML_TYPES:
        raise UnknownTensorType(type_id)
    type_name, block_size, block_bytes = GGML_TYPES[type_id]
    elements = 1
    for extent in shape:
        elements *= extent
    if elements > MAX_ELEMENTS:
        raise Corrupt(f"tensor {quoted(name)} claims an impossible size")
    if shape and shape[0] % block_size:
        raise Corrupt(f"tensor {quoted(name)} does not fit its number format")
    return name, offset, elements // block_size * block_bytes, elements, type_name


def count_of(number: int, noun: str) -> str:
    """A count and its noun in proper English: "1 byte", "2 bytes", "1,024 bytes"."""
    return f"{number:,} {noun}" if number == 1 else f"{number:,} {noun}s"


def quoted(name: str) -> str:
    """A name read from a header, quoted short and readable: a damaged one can run to
    tens of KB of other settings' bytes. It stops at the first character that is not
    printable text (bytes that were not UTF-8 read as U+FFFD) or after _EXCERPT_CHARS."""
    shown = ""
    for char in name[:_EXCERPT_CHARS]:
        if not char.isprintable() or char == "\ufffd":
            break
        shown += char
    if not shown:
        return f"with a name of {count_of(len(name), 'character')} that is not text"
    return f'"{shown}"' if shown == name else f'"{shown}…"'


class HeaderReader:
    """Reads little-endian values from the start of a file in large chunks."""

    def __init__(self, file: BinaryIO, file_size: int) -> None:
        self._file = file
        self._file_size = file_size
        self._buffer = b""
        self._position = 0  # within _buffer
        self._buffer_start = 0  # file offset of _buffer[0]

    @property
    def offset(self) -> int:
        return self._buffer_start + self._position

    def peek(self, count: int) -> bytes:
        self._fill(count)
        return self._buffer[self._position:self._position + count]

    def scalar(self, fmt: str) -> int | float | bool:
        """A setting's value, in one of the struct formats of _SCALAR_FORMATS."""
        value: int | float | bool = self._unpack(fmt)
        return value

    def uint(self, fmt: str) -> int:
        """A count, length, type id or offset: an unsigned struct format ("<I" or "<Q")."""
        value: int = self._unpack(fmt)
        return value

    def _unpack(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        self._fill(size)
        (value,) = struct.unpack_from(fmt, self._buffer, self._position)
        self._position += size
        return value

    def string(self) -> str:
        """A key or tensor name: short, so a long one means a damaged header."""
        length = self.uint("<Q")
        if length > MAX_NAME_BYTES:
            raise Corrupt(f"a name claims {count_of(length, 'byte')}")
        return self._text(length)

    def text_value(self) -> str | GgufSkipped:
        length = self.uint("<Q")
        if length > MAX_STRING_BYTES:
            raise Corrupt(f"a text claims {count_of(length, 'byte')}")
        if length > _KEPT_STRING_BYTES:
            self.skip(length)
            return GgufSkipped("string", length)
        return self._text(length)

    def _text(self, length: int) -> str:
        self._fill(length)
        raw = self._buffer[self._position:self._position + length]
        self._position += length
        return raw.decode("utf-8", errors="replace")

    def skip(self, count: int) -> None:
        target = self.offset + count
        if target > self._file_size:
            raise EndOfFile()
        if target <= self._buffer_start + len(self._buffer):
            self._position += count
            return
        self._buffer, self._position, self._buffer_start = b"", 0, target
        self._file.seek(target)

    def skip_strings(self, count: int) -> None:
        # The vocabulary alone can be several hundred thousand strings; this loop keeps
        # to local variables and refills only at chunk ends.
        unpack_length = struct.Struct("<Q").unpack_from
        for _ in range(count):
            if len(self._buffer) - self._position < 8:
                self._fill(8)
            (length,) = unpack_length(self._buffer, self._position)
            if length > MAX_STRING_BYTES:
                raise Corrupt(f"a text claims {count_of(length, 'byte')}")
            self._position += 8
            if len(self._buffer) - self._position >= length:
                self._position += length
            else:
                self.skip(length)

    def _fill(self, count: int) -> None:
        """Make count bytes available at the current position, or raise EndOfFile."""
        available = len(self._buffer) - self._position
        if available >= count:
            return
        if self.offset + count > self._file_size:
            raise EndOfFile()
        more = self._file.read(max(count - available, _READ_CHUNK))
        self._buffer = self._buffer[self._position:] + more
        self._buffer_start += self._position
        self._position = 0
        if len(self._buffer) < count:
            raise EndOfFile()
