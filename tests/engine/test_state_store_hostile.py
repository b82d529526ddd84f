"""Saved chat states someone else put in the folder: FIFOs, links, nested or huge headers, swapped bodies."""

from __future__ import annotations

import json
import os
import threading
import time
import zlib
from pathlib import Path
from typing import Callable, TypeVar

import pytest

from app.core.paths import data_paths
from app.engine.backends.llama import cache_files, kv_state
from app.engine.backends.llama.kv_state import StateKey
from app.engine.protocol import ChatMessage
from app.engine.backends.llama.state_store import StateStore
from tests.engine.test_kv_state import _answer, _chat, _load

KEY = StateKey("model.gguf|1|2", 2048, "template", "0.3.36")
TOKENS = tuple(range(1, 200))
BODY = b"state bytes" * 100
SECRET = bytes(range(32))
T = TypeVar("T")

posix_only = pytest.mark.skipif(os.name == "nt", reason="FIFOs and symbolic links as a user makes them on POSIX")


def _write(folder: Path, name: str = "good", tokens: tuple[int, ...] = TOKENS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{KEY.name}-{name}{kv_state.SUFFIX}"
    kv_state.write_file(path, KEY, tokens, BODY, False, secret=SECRET)
    return path


def _store(folder: Path) -> StateStore:
    return StateStore(KEY, folder, 1 << 30, secret=SECRET)


def _within(seconds: float, work: Callable[[], T], fifo: Path | None = None) -> T:
    """work()'s result, failing if it took longer than seconds; a reader blocked on fifo is let go."""
    result: list[T] = []
    thread = threading.Thread(target=lambda: result.append(work()), daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        if fifo is not None:  # open the other end, so that the blocked open returns and the thread ends
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            thread.join(5)
        pytest.fail(f"still blocked after {time.monotonic() - started:.0f} s")
    assert result, "the work raised (see the thread's exception above)"
    return result[0]


def _nested_header(path: Path, depth: int) -> None:
    header = b"[" * depth + b"]" * depth
    path.write_bytes(kv_state._PREFIX.pack(kv_state.MAGIC, kv_state.STATE_VERSION, len(header)) + header)


@posix_only
def test_a_fifo_among_the_states_never_blocks_a_scan_and_is_removed(tmp_path: Path) -> None:
    _write(tmp_path)
    fifo = tmp_path / f"{KEY.name}-fifo{kv_state.SUFFIX}"
    os.mkfifo(fifo)
    found = _within(10, lambda: _store(tmp_path).find(list(TOKENS) + [7], held=0), fifo)
    assert found is not None and found.data == BODY  # the good file beside it is still used
    assert not fifo.exists()


@posix_only
def test_a_fifo_put_in_place_of_a_known_state_never_blocks_its_read(tmp_path: Path) -> None:
    path = _write(tmp_path)
    store = _store(tmp_path)
    path.unlink()
    os.mkfifo(path)
    assert _within(10, lambda: store.find(list(TOKENS) + [7], held=0), path) is None
    assert not path.exists()


@posix_only
def test_a_link_is_never_followed_and_only_the_link_is_removed(tmp_path: Path) -> None:
    folder = tmp_path / "states"
    outside = _write(tmp_path / "elsewhere")  # a valid state, but not one in the folder
    link = folder / f"{KEY.name}-link{kv_state.SUFFIX}"
    folder.mkdir()
    link.symlink_to(outside)
    before = outside.read_bytes()
    assert _store(folder).find(list(TOKENS) + [7], held=0) is None
    assert not os.path.lexists(link)
    assert outside.read_bytes() == before


@pytest.mark.parametrize("depth", [400_000, 100])
def test_a_deeply_nested_header_is_removed_and_the_good_state_still_found(tmp_path: Path, depth: int) -> None:
    _write(tmp_path)
    nested = tmp_path / f"{KEY.name}-nested{kv_state.SUFFIX}"
    _nested_header(nested, depth)
    found = _store(tmp_path).find(list(TOKENS) + [7], held=0)
    assert found is not None and found.data == BODY
    assert not nested.exists()


def test_a_huge_header_is_removed_without_being_parsed(tmp_path: Path) -> None:
    path = _write(tmp_path)
    data = path.read_bytes()
    length = kv_state._PREFIX.unpack(data[:kv_state._PREFIX.size])[2]
    header = json.loads(data[kv_state._PREFIX.size:kv_state._PREFIX.size + length])
    header["padding"] = "x" * 900_000  # under the old 1 MiB cap, far over any header Kestrel writes
    raw = json.dumps(header).encode()
    rest = data[kv_state._PREFIX.size + length:]
    path.write_bytes(kv_state._PREFIX.pack(kv_state.MAGIC, kv_state.STATE_VERSION, len(raw)) + raw + rest)
    assert _store(tmp_path).find(list(TOKENS) + [7], held=0) is None
    assert not path.exists()


def test_a_header_claiming_more_tokens_than_the_context_is_removed(tmp_path: Path) -> None:
    tokens = tuple(range(1, KEY.context_length + 50))
    path = _write(tmp_path, tokens=tokens)
    assert _store(tmp_path).find(list(tokens) + [7], held=0) is None
    assert not path.exists()


@posix_only
def test_a_temporary_name_planted_as_a_link_is_never_written_through(tmp_path: Path) -> None:
    folder = tmp_path / "states"
    folder.mkdir()
    victim = tmp_path / "notes.txt"
    victim.write_text("the user's own file")
    # The names the landed writer would use for these tokens, under this process's id.
    name = f"{KEY.name}-{kv_state._digest(repr(TOKENS).encode())[:16]}{kv_state.SUFFIX}"
    (folder / f"{name}.{os.getpid()}.tmp").symlink_to(victim)
    store = _store(folder)
    store.save(TOKENS, BODY, False)
    store.close()
    assert victim.read_text() == "the user's own file"


def _parts(path: Path) -> tuple[dict, bytes, bytes, bytes]:
    """A state file as an attacker without Kestrel's key reads it: header, tokens, body and
    whatever follows the body."""
    data = path.read_bytes()
    start = kv_state._PREFIX.size
    length = kv_state._PREFIX.unpack(data[:start])[2]
    header = json.loads(data[start:start + length])
    tokens_at = start + length
    body_at = tokens_at + 4 * header["tokens"]
    body_end = body_at + header["state_bytes"]
    return header, data[tokens_at:body_at], data[body_at:body_end], data[body_end:]


def _swap_body(target: Path, donor: Path) -> None:
    """target's header and tokens with donor's KV bytes, every count and the CRC made to fit."""
    header, tokens, _, rest = _parts(target)
    _, _, body, _ = _parts(donor)
    header["state_bytes"] = len(body)
    if "checksum" in header:
        header["checksum"] = zlib.crc32(body, zlib.crc32(tokens))
    raw = json.dumps(header).encode()
    target.write_bytes(kv_state._PREFIX.pack(kv_state.MAGIC, kv_state.STATE_VERSION, len(raw))
                       + raw + tokens + body + rest)


def _only_state(folder: Path) -> Path:
    files = list(folder.glob(f"*{kv_state.SUFFIX}"))
    assert len(files) == 1, files
    return files[0]


def test_a_state_with_another_chats_kv_bytes_is_rejected_and_removed(tiny_model: Path, tmp_path: Path) -> None:
    first, other = _chat("kestrels"), _chat("lighthouses")
    replies = {}
    for name, chat in (("a", first), ("b", other)):
        backend = _load(tiny_model, tmp_path / name)
        replies[name] = _answer(backend, chat)
        backend.close()
    forged = _only_state(tmp_path / "a")
    _swap_body(forged, _only_state(tmp_path / "b"))
    follow_up = first + [ChatMessage("assistant", replies["a"]), ChatMessage("user", "And their nests?")]
    cold = _load(tiny_model, None)
    try:
        expected = _answer(cold, follow_up, tokens=24)
    finally:
        cold.close()
    reopened = _load(tiny_model, tmp_path / "a")
    try:
        assert _answer(reopened, follow_up, tokens=24) == expected
        assert reopened.restored_from == ""
    finally:
        reopened.close()


def test_a_swapped_body_is_rejected_and_removed(tmp_path: Path) -> None:
    target = _write(tmp_path)
    donor = tmp_path / "donor"
    donor.mkdir()
    kv_state.write_file(donor / f"{KEY.name}-b{kv_state.SUFFIX}", KEY, TOKENS[:150], b"another chat" * 90, False,
                        secret=SECRET)
    _swap_body(target, donor / f"{KEY.name}-b{kv_state.SUFFIX}")
    assert _store(tmp_path).find(list(TOKENS) + [7], held=0) is None
    assert not target.exists()


def test_a_file_signed_with_another_installs_key_is_rejected_and_removed(tmp_path: Path) -> None:
    path = tmp_path / f"{KEY.name}-elsewhere{kv_state.SUFFIX}"
    kv_state.write_file(path, KEY, TOKENS, BODY, False, secret=b"another install's key, 32 bytes!")
    assert kv_state.read_header(path) is not None  # well formed: only the key tells it apart
    assert _store(tmp_path).find(list(TOKENS) + [7], held=0) is None
    assert not path.exists()


def test_the_installs_key_is_made_once_in_the_data_folder_and_kept(tmp_path: Path) -> None:
    key = cache_files.install_secret(tmp_path / "data")
    assert key is not None and len(key) == cache_files.SECRET_BYTES
    assert (tmp_path / "data" / cache_files.SECRET_NAME).read_bytes() == key
    assert cache_files.install_secret(tmp_path / "data") == key
    assert cache_files.install_secret(tmp_path / "other data") != key


@pytest.mark.parametrize("damage", ["short", "link", "folder-less"])
def test_a_damaged_key_is_replaced_and_what_a_link_points_to_is_left(tmp_path: Path, damage: str) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    path = folder / cache_files.SECRET_NAME
    victim = tmp_path / "notes.txt"
    victim.write_bytes(b"x" * cache_files.SECRET_BYTES)  # the right length: a followed link would use it
    if damage == "short":
        path.write_bytes(b"short")
    elif damage == "link":
        if os.name == "nt":
            pytest.skip("symbolic links as a user makes them on POSIX")
        path.symlink_to(victim)
    else:
        folder.rmdir()
    key = cache_files.install_secret(folder)
    assert key is not None and key != victim.read_bytes()
    assert cache_files.is_regular(path) and path.read_bytes() == key
    assert victim.read_bytes() == b"x" * cache_files.SECRET_BYTES


def test_a_load_signs_its_states_with_the_key_in_the_data_folder(tiny_model: Path, tmp_path: Path) -> None:
    backend = _load(tiny_model, tmp_path / "states")
    _answer(backend, _chat("kestrels"))
    backend.close()
    key = (data_paths().data / cache_files.SECRET_NAME).read_bytes()
    state = _only_state(tmp_path / "states")
    header = kv_state.read_header(state)
    assert header is not None and kv_state.read_body(state, header, key) is not None
    assert kv_state.read_body(state, header, bytes(32)) is None
