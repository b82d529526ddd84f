"""Reads a GGUF model file's header, so a bad file gets a plain-words message before llama.cpp sees it."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import BinaryIO, Literal, Mapping

from app.core.files import kind_of
from app.library.model_files.gguf_header import (Corrupt, EndOfFile, HeaderReader, UnknownTensorType, count_of,
                                      padded, quoted, read_tensor_info, read_value)

ModelFileErrorKind = Literal[
    "missing", "not_a_file", "unreadable", "empty", "not_gguf",
    "unsupported_version", "truncated", "corrupt",
    "not_for_chat",  # a sound model that cannot chat (an embedding model), refused when loaded to chat
    "projector",  # a vision projector (mmproj): it goes with a model, never is one
]

GGUF_MAGIC = b"GGUF"
# Version 1 (mid 2023) used 32-bit counts and llama.cpp no longer reads it; 2 and 3
# share one layout.
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
# A newer format would bump the version by one or two; a number beyond this is noise.
_MAX_PLAUSIBLE_VERSION = 255
# Limits no real model comes near (gguf_header.py has the rest).
MAX_COUNT = 1 << 20
# llama.cpp keeps these sizes in 32-bit signed integers: a value from 2**31 on turns
# negative there (llama-cpp-python then fails with "Array length must be >= 0"), so such
# a header is damaged, most often by one flipped bit.
_INT32_SIZES = ("context_length", "block_count", "embedding_length",
                "attention.head_count", "attention.head_count_kv")
_INT32_LIMIT = 1 << 31


class ModelFileError(Exception):
    """A model file that cannot be used, with a message for the user and a kind for code."""

    def __init__(self, kind: ModelFileErrorKind, path: Path, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.path = path
        self.message = message


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
    # The bytes decoding one token reads, by number format ("Q4_K": bytes): every tensor but the token
    # embedding table, of which a token reads one row (unless the model has no output matrix of its
    # own and multiplies by that table for its logits). Empty when the header does not list them all.
    read_per_token: Mapping[str, int] = field(default_factory=dict, hash=False, repr=False)


def read_gguf_info(path: Path) -> GgufInfo:
    """Read the header of the GGUF file at path; raise ModelFileError if it is unusable."""
    path = Path(path)
    file_size = _checked_size(path)
    try:
        with path.open("rb") as file:
            return _parse(path, file, file_size)
    except EndOfFile:
        raise ModelFileError("truncated", path, (
            f'The model file "{path.name}" is incomplete: it ends after '
            f"{_format_size(file_size)}, part-way through its header. The download or "
            "copy was cut short; download it again."
        )) from None
    except UnknownTensorType as error:
        raise ModelFileError("unsupported_version", path, (
            f'The model file "{path.name}" stores its weights in a number format '
            f"(ggml type {error.type_id}) that this Kestrel does not know: it is either "
            "newer than Kestrel or one that llama.cpp has dropped. Update Kestrel, or "
            "download another quantization of the model (Q4_K_M works everywhere)."
        )) from None
    except Corrupt as error:
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
    reader = HeaderReader(file, file_size)
    _check_magic(path, reader, file_size)
    version = _check_version(path, reader.uint("<I"))
    tensor_count, kv_count = reader.uint("<Q"), reader.uint("<Q")
    if tensor_count > MAX_COUNT or kv_count > MAX_COUNT:
        raise Corrupt(f"it claims {count_of(tensor_count, 'tensor')} and {count_of(kv_count, 'setting')}")
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
        shown = f"{alignment:,}" if type(alignment) is int else quoted(str(alignment))
        raise Corrupt(f"its data alignment {shown} is not a power of two")
    data_start, data_end, parameter_count, read_per_token = _read_tensor_layout(reader, tensor_count, alignment)
    if data_end > file_size:
        have, want = _format_size(file_size), _format_size(data_end)
        if have == want:  # "47 GB of 47 GB" would read as complete
            have = f"{count_of(data_end - file_size, 'byte')} short of"
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
        read_per_token=MappingProxyType(read_per_token),
    )


def _check_int32_sizes(metadata: Mapping[str, object], architecture: str) -> None:
    for name in _INT32_SIZES:
        key = f"{architecture}.{name}"
        value = _as_int(metadata.get(key))
        if value is not None and not 0 <= value < _INT32_LIMIT:
            raise Corrupt(f"its setting {quoted(key)} gives the impossible value {value:,}")
    # A model without layers: llama.cpp aborts the whole process while loading it.
    layers = _as_int(metadata.get(f"{architecture}.block_count"))
    if layers == 0:
        raise Corrupt(f"its setting {quoted(f'{architecture}.block_count')} says the model has no layers")


def _read_metadata(reader: HeaderReader, kv_count: int) -> dict[str, object]:
    metadata: dict[str, object] = {}
    for index in range(kv_count):
        key = reader.string()
        if not key or key in metadata:
            raise Corrupt(f"setting number {index + 1} has an empty or repeated name")
        metadata[key] = read_value(reader, key)
    return metadata


def _read_tensor_layout(reader: HeaderReader, tensor_count: int,
                        alignment: int) -> tuple[int, int, int, dict[str, int]]:
    """Read the tensor index; return the file offsets where tensor data starts and ends,
    how many weights the tensors hold, and the bytes a token reads by number format."""
    # Tensor data must follow in order, each padded to the alignment: llama.cpp
    # refuses anything else, so the last tensor's end is where the file should end.
    expected_offset = 0
    data_length = 0
    weights = 0
    by_format: dict[str, int] = {}
    embedding: tuple[str, int] | None = None
    has_output = False
    for _ in range(tensor_count):
        name, offset, size, elements, number_format = read_tensor_info(reader)
        weights += elements
        if name == "token_embd.weight":
            embedding = (number_format, size)
        else:
            by_format[number_format] = by_format.get(number_format, 0) + size
            has_output = has_output or name == "output.weight"
        if offset != expected_offset:
            raise Corrupt(f"tensor {quoted(name)} is not where the file's index says it is")
        data_length = offset + size
        expected_offset = padded(data_length, alignment)
    data_start = padded(reader.offset, alignment) if tensor_count else reader.offset
    if embedding is not None and not has_output:  # tied: the logits read the whole table
        by_format[embedding[0]] = by_format.get(embedding[0], 0) + embedding[1]
    return data_start, data_start + data_length, weights, by_format


def _check_magic(path: Path, reader: HeaderReader, file_size: int) -> None:
    head = reader.peek(min(file_size, 16))
    if head[:4] == GGUF_MAGIC:
        reader.skip(4)
        return
    if GGUF_MAGIC.startswith(head):
        raise EndOfFile()
    if path.suffix.lower() == ".gguf":  # the name promises a model: something else was saved under it
        raise ModelFileError("not_gguf", path, (
            f'"{path.name}" is not a GGUF model file{describe_foreign(head)}, though its name ends in '
            ".gguf: a GGUF model starts with the letters \"GGUF\". If it came from a download, download "
            "it again from the model's page; otherwise choose the model file itself."
        ))
    raise ModelFileError("not_gguf", path, (
        f'"{path.name}" is not a GGUF model file{describe_foreign(head)}. Kestrel runs '
        "models in the GGUF format; download the .gguf version of this model."
    ))


def describe_foreign(head: bytes) -> str:
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
    detail = version_detail(version)
    if detail is None:
        return version
    raise ModelFileError("unsupported_version", path, (
        f'The model file "{path.name}" cannot be used: {detail}. Download a current '
        "GGUF of this model, or update Kestrel."
    ))


def version_detail(version: int) -> str | None:
    """Why a GGUF file of this format version cannot be used (None: it can); Corrupt for a
    number no GGUF writer ever used."""
    if version in SUPPORTED_VERSIONS:
        return None
    if version & 0xFFFF == 0 and (version >> 24) in SUPPORTED_VERSIONS:
        return "it was made for big-endian computers, which Kestrel does not support"
    if version > _MAX_PLAUSIBLE_VERSION:
        raise Corrupt(f"its header gives the impossible format version {version}")
    if version < min(SUPPORTED_VERSIONS):
        return f"it uses the early GGUF version {version}, which llama.cpp no longer reads"
    return f"it uses GGUF version {version}, newer than this Kestrel understands"


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
    return count_of(size, "byte")
