"""A conversation's KV cache as bytes: taken from llama.cpp, put back, and its file format."""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import struct
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO, Sequence

import llama_cpp

# Raise when the file layout or what a state means changes: older files are then
# removed when they are seen, never read.
STATE_VERSION = 1
MAGIC = b"KESTRELKV"
SUFFIX = ".kvstate"
# magic, version, header length; then the JSON header, the tokens (int32), the state.
_PREFIX = struct.Struct("<9sHI")
_SEQ = 0  # Kestrel keeps one conversation per context, in sequence 0.


@dataclass(frozen=True)
class StateKey:
    """What a saved state is valid for: the exact model file, context, template and runtime.

    The token prefix is kept beside it; a state is used only for a prompt that starts
    with it.
    """

    model: str  # path, size and modification time of the model file
    context_length: int
    template: str  # hash of the chat template in use
    runtime: str  # llama-cpp-python's version: a newer llama.cpp may lay out state otherwise
    version: int = STATE_VERSION

    @classmethod
    def of(cls, model_path: str, context_length: int, template: str) -> "StateKey":
        stat = os.stat(model_path)
        model = f"{os.path.abspath(model_path)}|{stat.st_size}|{stat.st_mtime_ns}"
        return cls(model, context_length, _digest(template.encode("utf-8")), llama_cpp.__version__)

    @property
    def name(self) -> str:
        """The start of every file name of this key, so a scan reads only its own files."""
        return _digest(json.dumps(asdict(self), sort_keys=True).encode())[:16]


@dataclass(frozen=True)
class StateHeader:
    """What a state file says about itself, read before its body is trusted."""

    key: StateKey
    tokens: tuple[int, ...]
    state_bytes: int
    checksum: int
    # The model keeps only part of its memory per sequence (a sliding window, a
    # recurrent state): then the state continues exactly where it ended, never earlier.
    whole_prefix_only: bool
    body_offset: int


def capture(ctx: llama_cpp.llama_context_p) -> tuple[bytes, bool]:
    """Sequence 0's KV cells (the used cells only: no padding to the context, no logits),
    and whether the model keeps a partial memory (sliding window, recurrent)."""
    size = llama_cpp.llama_state_seq_get_size(ctx, _SEQ)
    buffer = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, _SEQ)
    return bytes(memoryview(buffer)[:written]), keeps_partial_memory(ctx)


def keeps_partial_memory(ctx: llama_cpp.llama_context_p) -> bool:
    """A sliding window (its cells outside the window are not saved) or a recurrent state:
    such a state continues where it ended, never from an earlier token."""
    model = llama_cpp.llama_get_model(ctx)
    return bool(llama_cpp.llama_model_n_swa(model) > 0 or llama_cpp.llama_model_is_recurrent(model)
                or llama_cpp.llama_model_is_hybrid(model))


def restore(ctx: llama_cpp.llama_context_p, data: bytes) -> bool:
    """Replace sequence 0 with a captured state; False (and sequence 0 empty) if refused."""
    memory = llama_cpp.llama_get_memory(ctx)
    llama_cpp.llama_memory_seq_rm(memory, _SEQ, -1, -1)
    buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
    if llama_cpp.llama_state_seq_set_data(ctx, buffer, len(data), _SEQ) == 0:
        llama_cpp.llama_memory_seq_rm(memory, _SEQ, -1, -1)
        return False
    return True


def write_file(path: Path, key: StateKey, tokens: Sequence[int], data: bytes, whole_prefix_only: bool) -> None:
    """Write a state file under a temporary name, then rename it: a crash half-way leaves
    only a temporary file, which no reader opens."""
    token_bytes = struct.pack(f"<{len(tokens)}i", *tokens)
    header = json.dumps({"key": asdict(key), "tokens": len(tokens), "state_bytes": len(data),
                         "checksum": zlib.crc32(data, zlib.crc32(token_bytes)),
                         "whole_prefix_only": whole_prefix_only}).encode()
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        with temporary.open("wb") as file:
            file.write(_PREFIX.pack(MAGIC, STATE_VERSION, len(header)))
            file.write(header)
            file.write(token_bytes)
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def read_header(path: Path) -> StateHeader | None:
    """The header and tokens of a state file, or None when it is not one Kestrel can use
    (another version, truncated, not a state file at all)."""
    try:
        with path.open("rb") as file:
            return _header(file, path.stat().st_size)
    except (OSError, ValueError, KeyError, TypeError, struct.error, json.JSONDecodeError):
        return None


def read_body(path: Path, header: StateHeader) -> bytes | None:
    """The state bytes, or None when the file no longer matches its checksum."""
    try:
        with path.open("rb") as file:
            file.seek(header.body_offset - 4 * len(header.tokens))
            token_bytes = file.read(4 * len(header.tokens))
            data = file.read(header.state_bytes + 1)
    except OSError:
        return None
    if len(data) != header.state_bytes or zlib.crc32(data, zlib.crc32(token_bytes)) != header.checksum:
        return None
    return data


def _header(file: BinaryIO, file_size: int) -> StateHeader | None:
    prefix = file.read(_PREFIX.size)
    if len(prefix) != _PREFIX.size:
        return None
    magic, version, header_length = _PREFIX.unpack(prefix)
    if magic != MAGIC or version != STATE_VERSION or header_length > 1 << 20:
        return None
    raw = json.loads(file.read(header_length))
    key = StateKey(**raw["key"])
    count, state_bytes = int(raw["tokens"]), int(raw["state_bytes"])
    body_offset = _PREFIX.size + header_length + 4 * count
    if count <= 0 or state_bytes <= 0 or body_offset + state_bytes != file_size:
        return None  # truncated, or longer than it says: either way not what was written
    tokens = struct.unpack(f"<{count}i", file.read(4 * count))
    return StateHeader(key, tuple(tokens), state_bytes, int(raw["checksum"]), bool(raw["whole_prefix_only"]),
                       body_offset)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
