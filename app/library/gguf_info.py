"""Reads a GGUF model file's header, so a bad file gets a plain-words message before llama.cpp sees it."""

from __future__ import annotations

import errno
import os
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, BinaryIO, Literal, Mapping

from app.core.files import kind_of
from app.library.ggml_types import GGML_TYPES

ModelFileErrorKind = Literal[
    "missing", "not_a_file", "unreadable", "empty", "not_gguf",
    "unsupported_version", "truncated", "corrupt",
    "not_for_chat",  # a sound model that cannot chat (an embedding model), refused when loaded to chat
]

GGUF_MAGIC = b"GGUF"
# Version 1 (mid 2023) used 32-bit counts and llama.cpp no longer reads it; 2 and 3
# share one layout.
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
# GGUF metadata value types: id -> struct format of one value (string and array are
# variable-sized and handled apart).
_STRING, _ARRAY = 8, 9
_SCALAR_FORMATS: Mapping[int, str] = MappingProxyType({
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
    10: "<Q", 11: "<q", 12: "<d",
})
_MAX_DIMS = 4  # GGML_MAX_DIMS
# A newer format would bump the version by one or two; a number beyond this is noise.
_MAX_PLAUSIBLE_VERSION = 255
# Limits no real model comes near; a header beyond them is damaged, and we say so
# instead of trying to allocate or skip that much.
_MAX_COUNT = 1 << 20
_MAX_ARRAY_LENGTH = 1 << 28
_MAX_STRING_BYTES = 1 << 28
_MAX_NAME_BYTES = 1 << 16
_MAX_ELEMENTS = 1 << 50
# Number arrays up to this length and texts up to this size (chat templates run to
# tens of KB) are kept in metadata; bigger values, and all string arrays such as the
# vocabulary, are skipped and summarised as GgufSkipped.
_KEPT_ARRAY_LENGTH = 64
_KEPT_STRING_BYTES = 1 << 20
_READ_CHUNK = 1 << 20
# llama.cpp keeps these sizes in 32-bit signed integers: a value from 2**31 on turns
# negative there (llama-cpp-python then fails with "Array length must be >= 0"), so such
# a header is damaged, most often by one flipped bit.
_INT32_SIZES = ("context_length", "block_count", "embedding_length",
                "attention.head_count", "attention.head_count_kv")
_INT32_LIMIT = 1 << 31
# How much of a name from a damaged header a message quotes.
_EXCERPT_CHARS = 40


class ModelFileError(Exception):
    """A model file that cannot be used, with a message for the user and a kind for code."""

    def __init__(self, kind: ModelFileErrorKind, path: Path, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.path = path
        self.message = message


@dataclass(frozen=True)
class GgufSkipped:
    """A metadata value too big to keep, such as the vocabulary: its type and length.

    type_name is "array[string]", "array[float32]" and so on, or "string" for a very
    long text; length counts elements, or bytes for a text.
    """

    type_name: str
    length: int


@dataclass(frozen=True)
class GgufInfo:
    """What a GGUF file's header says about the model, and where its data should end."""

    path: Path
    file_size: int
    version: int
    architecture: str
    name: str | None
    context_length: int | None
    block_count: int | None
    embedding_length: int | None
    head_count: int | None
    head_count_kv: int | None
    chat_template: str | None
    bos_token_id: int | None
    eos_token_id: int | None
    tensor_count: int
    alignment: int
    data_start: int
    data_end: int
    metadata: Mapping[str, object] = field(hash=False, repr=False)
    # The weights: every tensor's elements added up (a header states no count of its own).
    parameter_count: int = 0


class _EndOfFile(Exception):
    """The header asked for bytes past the end of the file."""


class _Corrupt(Exception):
    """The header holds a value no valid file has; the message says which."""


class _UnknownTensorType(Exception):
    """A tensor uses a ggml number format this table does not know (dropped or too new)."""

    def __init__(self, type_id: int) -> None:
        super().__init__(type_id)
        self.type_id = type_id


def read_gguf_info(path: Path) -> GgufInfo:
    """Read the header of the GGUF file at path; raise ModelFileError if it is unusable."""
    path = Path(path)
    file_size = _checked_size(path)
    try:
        with path.open("rb") as file:
            return _parse(path, file, file_size)
    except _EndOfFile:
        raise ModelFileError("truncated", path, (
            f'The model file "{path.name}" is incomplete: it ends after '
            f"{_format_size(file_size)}, part-way through its header. The download or "
            "copy was cut short; download it again."
        )) from None
    except _UnknownTensorType as error:
        raise ModelFileError("unsupported_version", path, (
            f'The model file "{path.name}" stores its weights in a number format '
            f"(ggml type {error.type_id}) that this Kestrel does not know: it is either "
            "newer than Kestrel or one that llama.cpp has dropped. Update Kestrel, or "
            "download another quantization of the model (Q4_K_M works everywhere)."
        )) from None
    except _Corrupt as error:
        raise ModelFileError("corrupt", path, (
            f'The model file "{path.name}" is damaged ({error}). Download it again; '
            "if that does not help, the file itself is broken: get it from another source."
        )) from None
    except OSError as error:
        raise _unreadable(path, error) from None


def _checked_size(path: Path) -> int:
    status = checked_path(path)
    if stat.S_ISDIR(status.st_mode):
        raise ModelFileError("not_a_file", path, (
            f"{path} is a folder, not a model file. Choose the .gguf file itself."
        ))
    if status.st_size == 0:
        raise ModelFileError("empty", path, (
            f'The model file "{path.name}" is empty (0 bytes). The download or copy did '
            "not finish; download it again."
        ))
    return status.st_size


def checked_path(path: Path, noun: str = "model file",
                 error: type[ModelFileError] = ModelFileError) -> os.stat_result:
    """What the path leads to (links followed): a regular file or a folder, else `error`.

    Nothing is opened: a named pipe would wait for a writer for ever, and a device could
    hand out bytes without end. noun ("model file", "model") words the not-found message.
    """
    try:
        status = path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise error("unreadable", path, (
                f"{path} is a symbolic link that leads back to itself (a loop of links), so there "
                "is no model at the end of it. Choose the model file or folder itself."
            )) from None
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
            raise _unreadable(path, exc, error, noun) from None
        raise error("missing", path, _not_found(path, noun)) from None
    if not (stat.S_ISREG(status.st_mode) or stat.S_ISDIR(status.st_mode)):
        raise error("not_a_file", path, (
            f"{path} is not a regular file but {kind_of(status.st_mode)}, so Kestrel cannot "
            "read a model from it. Choose the .gguf file or the ONNX model folder itself."
        ))
    return status


def _not_found(path: Path, noun: str) -> str:
    try:
        target = os.readlink(path)
    except (OSError, ValueError, NotImplementedError):  # not a link: simply missing
        return (f"The {noun} {path} was not found. It may have been moved, renamed or "
                "deleted; add the model again or choose another one.")
    return (f"{path} is a link to {target}, which does not exist. The model may have been "
            "moved or deleted; point the link at it again, or choose the model itself.")



def _unreadable(path: Path, error: OSError, kind: type[ModelFileError] = ModelFileError,
                noun: str = "model file") -> ModelFileError:
    reason = error.strerror or str(error)
    return kind("unreadable", path, (
        f"Kestrel could not read the {noun} {path} ({reason}). Check that it is not locked "
        "by another program and that you may read it, then try again."
    ))


def _parse(path: Path, file: BinaryIO, file_size: int) -> GgufInfo:
    reader = _HeaderReader(file, file_size)
    _check_magic(path, reader, file_size)
    version = _check_version(path, reader.uint("<I"))
    tensor_count, kv_count = reader.uint("<Q"), reader.uint("<Q")
    if tensor_count > _MAX_COUNT or kv_count > _MAX_COUNT:
        raise _Corrupt(f"it claims {_count(tensor_count, 'tensor')} and {_count(kv_count, 'setting')}")
    metadata = _read_metadata(reader, kv_count)
    architecture = metadata.get("general.architecture")
    if not isinstance(architecture, str) or not architecture:
        raise ModelFileError("corrupt", path, (
            f'"{path.name}" is a GGUF file but does not say which model architecture it '
            "holds, so it is not a model Kestrel can run. Choose the model's main .gguf file."
        ))
    _check_int32_sizes(metadata, architecture)
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if type(alignment) is not int or alignment <= 0 or alignment & (alignment - 1):
        shown = f"{alignment:,}" if type(alignment) is int else _quoted(str(alignment))
        raise _Corrupt(f"its data alignment {shown} is not a power of two")
    data_start, data_end, parameter_count = _read_tensor_layout(reader, tensor_count, alignment)
    if data_end > file_size:
        have, want = _format_size(file_size), _format_size(data_end)
        if have == want:  # "47 GB of 47 GB" would read as complete
            have = f"{_count(data_end - file_size, 'byte')} short of"
        else:
            have += " of"
        raise ModelFileError("truncated", path, (
            f'The model file "{path.name}" is incomplete: {have} {want}. The download or copy '
            "was cut short; download it again."
        ))

    def number(key: str) -> int | None:
        return _as_int(metadata.get(key))

    def text(key: str) -> str | None:
        value = metadata.get(key)
        return value if isinstance(value, str) else None

    return GgufInfo(
        path=path, file_size=file_size, version=version, architecture=architecture,
        name=text("general.name"),
        context_length=number(f"{architecture}.context_length"),
        block_count=number(f"{architecture}.block_count"),
        embedding_length=number(f"{architecture}.embedding_length"),
        head_count=number(f"{architecture}.attention.head_count"),
        head_count_kv=number(f"{architecture}.attention.head_count_kv"),
        chat_template=text("tokenizer.chat_template"),
        bos_token_id=number("tokenizer.ggml.bos_token_id"),
        eos_token_id=number("tokenizer.ggml.eos_token_id"),
        tensor_count=tensor_count, alignment=alignment,
        data_start=data_start, data_end=data_end,
        metadata=MappingProxyType(metadata), parameter_count=parameter_count,
    )


def _check_int32_sizes(metadata: Mapping[str, object], architecture: str) -> None:
    for name in _INT32_SIZES:
        key = f"{architecture}.{name}"
        value = _as_int(metadata.get(key))
        if value is not None and not 0 <= value < _INT32_LIMIT:
            raise _Corrupt(f"its setting {_quoted(key)} gives the impossible value {value:,}")
    # A model without layers: llama.cpp aborts the whole process while loading it.
    layers = _as_int(metadata.get(f"{architecture}.block_count"))
    if layers == 0:
        raise _Corrupt(f"its setting {_quoted(f'{architecture}.block_count')} says the model has no layers")


def _read_metadata(reader: _HeaderReader, kv_count: int) -> dict[str, object]:
    metadata: dict[str, object] = {}
    for index in range(kv_count):
        key = reader.string()
        if not key or key in metadata:
            raise _Corrupt(f"setting number {index + 1} has an empty or repeated name")
        metadata[key] = _read_value(reader, key)
    return metadata


def _read_tensor_layout(reader: _HeaderReader, tensor_count: int,
                        alignment: int) -> tuple[int, int, int]:
    """Read the tensor index; return the file offsets where tensor data starts and ends,
    and how many weights the tensors hold."""
    # Tensor data must follow in order, each padded to the alignment: llama.cpp
    # refuses anything else, so the last tensor's end is where the file should end.
    expected_offset = 0
    data_length = 0
    weights = 0
    for _ in range(tensor_count):
        name, offset, size, elements = _read_tensor_info(reader)
        weights += elements
        if offset != expected_offset:
            raise _Corrupt(f"tensor {_quoted(name)} is not where the file's index says it is")
        data_length = offset + size
        expected_offset = _padded(data_length, alignment)
    data_start = _padded(reader.offset, alignment) if tensor_count else reader.offset
    return data_start, data_start + data_length, weights


def _check_magic(path: Path, reader: _HeaderReader, file_size: int) -> None:
    head = reader.peek(min(file_size, 16))
    if head[:4] == GGUF_MAGIC:
        reader.skip(4)
        return
    if GGUF_MAGIC.startswith(head):
        raise _EndOfFile()
    if path.suffix.lower() == ".gguf":  # the name promises a model: something else was saved under it
        raise ModelFileError("not_gguf", path, (
            f'"{path.name}" is not a GGUF model file{_describe_foreign(head)}, though its name ends in '
            ".gguf: a GGUF model starts with the letters \"GGUF\". If it came from a download, download "
            "it again from the model's page; otherwise choose the model file itself."
        ))
    raise ModelFileError("not_gguf", path, (
        f'"{path.name}" is not a GGUF model file{_describe_foreign(head)}. Kestrel runs '
        "models in the GGUF format; download the .gguf version of this model."
    ))


def _describe_foreign(head: bytes) -> str:
    """A hint at what the file is instead, when its first bytes give it away."""
    lowered = head.lstrip().lower()
    if lowered.startswith((b"<!doctype", b"<html", b"<?xml", b"{", b"[")):
        return " (it holds a web page or text, not a model: the download probably failed)"
    if head[:4] in (b"lmgg", b"fmgg", b"tjgg"):
        return " (it is in the old GGML format that GGUF replaced in 2023)"
    if head[:4] == b"PK\x03\x04":
        return " (it is a ZIP archive, such as a PyTorch checkpoint)"
    if len(head) >= 9 and head[8:9] == b"{":
        return " (it looks like a safetensors file)"
    return ""


def _check_version(path: Path, version: int) -> int:
    if version in SUPPORTED_VERSIONS:
        return version
    if version & 0xFFFF == 0 and (version >> 24) in SUPPORTED_VERSIONS:
        detail = "it was made for big-endian computers, which Kestrel does not support"
    elif version > _MAX_PLAUSIBLE_VERSION:
        raise _Corrupt(f"its header gives the impossible format version {version}")
    elif version < min(SUPPORTED_VERSIONS):
        detail = f"it uses the early GGUF version {version}, which llama.cpp no longer reads"
    else:
        detail = f"it uses GGUF version {version}, newer than this Kestrel understands"
    raise ModelFileError("unsupported_version", path, (
        f'The model file "{path.name}" cannot be used: {detail}. Download a current '
        "GGUF of this model, or update Kestrel."
    ))


def _read_value(reader: _HeaderReader, key: str) -> object:
    value_type = reader.uint("<I")
    scalar_format = _SCALAR_FORMATS.get(value_type)
    if scalar_format is not None:
        return reader.scalar(scalar_format)
    if value_type == _STRING:
        return reader.text_value()
    if value_type == _ARRAY:
        return _read_array(reader, key)
    raise _Corrupt(f"setting {_quoted(key)} has the unknown value type {value_type}")


def _read_array(reader: _HeaderReader, key: str) -> tuple[object, ...] | GgufSkipped:
    element_type, length = reader.uint("<I"), reader.uint("<Q")
    # llama.cpp refuses arrays of arrays too, so there is nothing to skip them for.
    if element_type not in _SCALAR_FORMATS and element_type != _STRING:
        raise _Corrupt(f"setting {_quoted(key)} has the unknown value type {element_type}")
    if length > _MAX_ARRAY_LENGTH:
        raise _Corrupt(f"setting {_quoted(key)} claims {_count(length, 'value')}")
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


def _padded(offset: int, alignment: int) -> int:
    return -(-offset // alignment) * alignment


def _read_tensor_info(reader: _HeaderReader) -> tuple[str, int, int, int]:
    """Read one tensor description: its name, data offset, data size in bytes and elements."""
    name = reader.string()
    n_dims = reader.uint("<I")
    if n_dims > _MAX_DIMS:
        raise _Corrupt(f"tensor {_quoted(name)} claims {_count(n_dims, 'dimension')}")
    shape = [reader.uint("<Q") for _ in range(n_dims)]
    type_id, offset = reader.uint("<I"), reader.uint("<Q")
    if type_id not in GGML_TYPES:
        raise _UnknownTensorType(type_id)
    _, block_size, block_bytes = GGML_TYPES[type_id]
    elements = 1
    for extent in shape:
        elements *= extent
    if elements > _MAX_ELEMENTS:
        raise _Corrupt(f"tensor {_quoted(name)} claims an impossible size")
    if shape and shape[0] % block_size:
        raise _Corrupt(f"tensor {_quoted(name)} does not fit its number format")
    return name, offset, elements // block_size * block_bytes, elements


def _as_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    # Some models give a per-layer list (for example head counts); the largest is what
    # sizing needs.
    if isinstance(value, tuple) and value and all(type(v) is int for v in value):
        return max(value)
    return None


def _format_size(size: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= scale:
            amount = size / scale
            return f"{amount:.1f} {unit}" if amount < 10 else f"{amount:.0f} {unit}"
    return _count(size, "byte")


def _count(number: int, noun: str) -> str:
    """A count and its noun in proper English: "1 byte", "2 bytes", "1,024 bytes"."""
    return f"{number:,} {noun}" if number == 1 else f"{number:,} {noun}s"


def _quoted(name: str) -> str:
    """A name read from a header, quoted short and readable: a damaged one can run to
    tens of KB of other settings' bytes. It stops at the first character that is not
    printable text (bytes that were not UTF-8 read as U+FFFD) or after _EXCERPT_CHARS."""
    shown = ""
    for char in name[:_EXCERPT_CHARS]:
        if not char.isprintable() or char == "\ufffd":
            break
        shown += char
    if not shown:
        return f"with a name of {_count(len(name), 'character')} that is not text"
    return f'"{shown}"' if shown == name else f'"{shown}…"'



class _HeaderReader:
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
        if length > _MAX_NAME_BYTES:
            raise _Corrupt(f"a name claims {_count(length, 'byte')}")
        return self._text(length)

    def text_value(self) -> str | GgufSkipped:
        length = self.uint("<Q")
        if length > _MAX_STRING_BYTES:
            raise _Corrupt(f"a text claims {_count(length, 'byte')}")
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
            raise _EndOfFile()
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
            if length > _MAX_STRING_BYTES:
                raise _Corrupt(f"a text claims {_count(length, 'byte')}")
            self._position += 8
            if len(self._buffer) - self._position >= length:
                self._position += length
            else:
                self.skip(length)

    def _fill(self, count: int) -> None:
        """Make count bytes available at the current position, or raise _EndOfFile."""
        available = len(self._buffer) - self._position
        if available >= count:
            return
        if self.offset + count > self._file_size:
            raise _EndOfFile()
        more = self._file.read(max(count - available, _READ_CHUNK))
        self._buffer = self._buffer[self._position:] + more
        self._buffer_start += self._position
        self._position = 0
        if len(self._buffer) < count:
            raise _EndOfFile()
