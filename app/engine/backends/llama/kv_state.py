"""A conversation's KV cache as bytes: taken from llama.cpp, put back, and its signed file format."""

from __future__ import annotations

import ctypes
import hashlib
import hmac
import json
import os
import struct
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Sequence

from app.engine.backends.llama import cache_files

# llama.cpp is imported inside the functions that touch a context: the window reads the states'
# folder (app/service/models/kv_cache.py) through this module, and must not load its libraries.
if TYPE_CHECKING:
    import llama_cpp

# Raise when the file layout or what a state means changes: older files are then
# removed when they are seen, never read. 2: signed (HMAC-SHA-256), and a sliding
# window's state holds every cell, not only the window's.
STATE_VERSION = 2
MAGIC = b"KESTRELKV"
SUFFIX = ".kvstate"
# magic, version, header length; then the JSON header, the tokens (int32), the state,
# and the HMAC-SHA-256 of all that under the install's key (cache_files.install_secret).
_PREFIX = struct.Struct("<9sHI")
MAC_BYTES = hashlib.sha256().digest_size
# What Kestrel writes is a few hundred bytes two levels deep; anything far past that was
# not written by it, and is refused before it is parsed.
MAX_HEADER = 64 * 1024
MAX_HEADER_DEPTH = 4
MAX_CONTEXT = 1 << 24
# The whole memory: Kestrel keeps one conversation per context (n_seq_max 1), in sequence 0.
_ALL_SEQUENCES = -1
_SEQ = 0


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
        import llama_cpp

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
    # The model keeps only part of its memory (a recurrent state, a window cache that
    # was not full-size): then the state continues exactly where it ended, never earlier.
    whole_prefix_only: bool
    body_offset: int
    file_size: int


def capture(ctx: llama_cpp.llama_context_p) -> tuple[bytes, bool]:
    """The context's KV cells (the used cells only: no padding to the context, no logits),
    and whether the model keeps a partial memory (recurrent, or cells already gone).

    The whole memory's state, not sequence 0's: llama.cpp leaves out of a sequence's
    state the cells its sliding window has passed (they are masked for the next token),
    so such a state could only go on from its last token; the whole memory's keeps every
    cell the cache holds, and with the full-size window cache Kestrel loads (swa_full)
    that is every cell, so a Gemma 3 state can be cut back to any prefix like any other.
    """
    import llama_cpp

    if llama_cpp.llama_n_seq_max(ctx) != 1:
        raise RuntimeError("a context with more than one sequence: its whole memory is not one chat")
    size = llama_cpp.llama_state_seq_get_size(ctx, _ALL_SEQUENCES)
    buffer = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, _ALL_SEQUENCES)
    return bytes(memoryview(buffer)[:written]), keeps_partial_memory(ctx)


def keeps_partial_memory(ctx: llama_cpp.llama_context_p) -> bool:
    """A recurrent or hybrid state, or a cache whose first cells are gone (a sliding
    window without the full-size cache): its state continues where it ended, never from
    an earlier token."""
    import llama_cpp

    model = llama_cpp.llama_get_model(ctx)
    if llama_cpp.llama_model_is_recurrent(model) or llama_cpp.llama_model_is_hybrid(model):
        return True
    return bool(llama_cpp.llama_memory_seq_pos_min(llama_cpp.llama_get_memory(ctx), _SEQ) > 0)


def restore(ctx: llama_cpp.llama_context_p, data: bytes) -> bool:
    """Replace the context's memory with a captured state; False (and the memory empty) if refused."""
    import llama_cpp

    memory = llama_cpp.llama_get_memory(ctx)
    llama_cpp.llama_memory_clear(memory, True)
    buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
    if llama_cpp.llama_state_seq_set_data(ctx, buffer, len(data), _ALL_SEQUENCES) == 0:
        llama_cpp.llama_memory_clear(memory, True)
        return False
    return True


def write_file(path: Path, key: StateKey, tokens: Sequence[int], data: bytes, whole_prefix_only: bool, *,
               secret: bytes) -> None:
    """Write a signed state file under a new temporary name, then rename it: a crash
    half-way leaves only a temporary file, which no reader opens."""
    token_bytes = struct.pack(f"<{len(tokens)}i", *tokens)
    header = json.dumps({"key": asdict(key), "tokens": len(tokens), "state_bytes": len(data),
                         "whole_prefix_only": whole_prefix_only}).encode()
    prefix = _PREFIX.pack(MAGIC, STATE_VERSION, len(header))
    mac = hmac.new(secret, digestmod=hashlib.sha256)
    descriptor, temporary = cache_files.make_temporary(path.parent, f"{path.name}.")
    try:
        with os.fdopen(descriptor, "wb") as file:
            for part in (prefix, header, token_bytes, data):
                file.write(part)
                mac.update(part)
            file.write(mac.digest())
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def read_header(path: Path) -> StateHeader | None:
    """The header and tokens of a state file, or None when it is not one Kestrel can use:
    another version, truncated, not a regular file, a header too big, too deep or not
    what Kestrel writes. Nothing here can block or recurse without bound."""
    file = cache_files.open_regular(path)
    if file is None:
        return None
    try:
        with file:
            return _header(file, os.fstat(file.fileno()).st_size)
    except (OSError, ValueError, struct.error):
        return None


def read_body(path: Path, header: StateHeader, secret: bytes) -> bytes | None:
    """The state bytes, or None when the file is no longer the one indexed or its
    signature does not hold: a body from another chat, or a file from another install."""
    file = cache_files.open_regular(path)
    if file is None:
        return None
    try:
        with file:
            if _header(file, os.fstat(file.fileno()).st_size) != header:
                return None
            file.seek(0)
            mac = hmac.new(secret, file.read(header.body_offset), hashlib.sha256)
            data = file.read(header.state_bytes)
            mac.update(data)
            signature = file.read(MAC_BYTES + 1)
    except (OSError, ValueError, struct.error):
        return None
    if len(data) != header.state_bytes or not hmac.compare_digest(mac.digest(), signature):
        return None
    return data


def _header(file: BinaryIO, file_size: int) -> StateHeader | None:
    prefix = file.read(_PREFIX.size)
    if len(prefix) != _PREFIX.size:
        return None
    magic, version, header_length = _PREFIX.unpack(prefix)
    if magic != MAGIC or version != STATE_VERSION or not 0 < header_length <= MAX_HEADER:
        return None
    parsed = _fields(cache_files.bounded_json(file.read(header_length), MAX_HEADER_DEPTH))
    if parsed is None:
        return None
    key, count, state_bytes, whole_prefix_only = parsed
    body_offset = _PREFIX.size + header_length + 4 * count
    if body_offset + state_bytes + MAC_BYTES != file_size:
        return None  # truncated, or longer than it says: either way not what was written
    token_bytes = file.read(4 * count)
    if len(token_bytes) != 4 * count:
        return None
    tokens = struct.unpack(f"<{count}i", token_bytes)
    return StateHeader(key, tuple(tokens), state_bytes, whole_prefix_only, body_offset, file_size)


def _fields(raw: object) -> tuple[StateKey, int, int, bool] | None:
    """The header's values when they are exactly what write_file writes, each of its type."""
    if not isinstance(raw, dict) or set(raw) != {"key", "tokens", "state_bytes", "whole_prefix_only"}:
        return None
    key = _key(raw["key"])
    count, state_bytes, whole_prefix_only = raw["tokens"], raw["state_bytes"], raw["whole_prefix_only"]
    if key is None or not _is_int(count) or not _is_int(state_bytes) or not isinstance(whole_prefix_only, bool):
        return None
    if not 0 < count <= key.context_length or state_bytes <= 0:
        return None
    return key, count, state_bytes, whole_prefix_only


def _key(raw: object) -> StateKey | None:
    types = {field.name: field.type for field in fields(StateKey)}
    if not isinstance(raw, dict) or set(raw) != set(types):
        return None
    for name, kind in types.items():
        value = raw[name]
        if not (_is_int(value) if kind == "int" else isinstance(value, str)):
            return None
    key = StateKey(**raw)
    return key if 0 < key.context_length <= MAX_CONTEXT else None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
