"""Saved conversation states: restored ones answer as the cache they were taken from, bad files are removed."""

from __future__ import annotations

import dataclasses
import os
import struct
from pathlib import Path

import pytest

from app.core.generation import GenerationSettings
from app.engine.backends.llama import kv_state
from app.engine.backends.backend import DeviceChoice
from app.engine.control import GenerationControl
from app.engine.backends.llama.gguf_backend import GgufBackend
from app.engine.backends.llama.kv_state import StateKey
from app.engine.protocol import ChatMessage, Delta, Done, Generate, Load
from app.engine.backends.llama.state_store import StateStore, evict_to_budget, folder_usage

CHOICE = DeviceChoice("CPU")
KEY = StateKey("model.gguf|1|2", 2048, "template", "0.3.36")
TOKENS = tuple(range(1, 200))
SECRET = bytes(range(32))


def _load(model: Path, folder: Path | None, context: int = 1024, ram: int = 1 << 28) -> GgufBackend:
    return GgufBackend.load(Load(1, str(model), context_length=context, threads=1, state_ram_bytes=ram,
                                 state_dir=str(folder) if folder else None,
                                 state_disk_bytes=1 << 30 if folder else 0), CHOICE)


def _answer(backend: GgufBackend, messages: list[ChatMessage], tokens: int = 12, keep_state: bool = True) -> str:
    control = GenerationControl()
    control.begin(1)
    request = Generate(1, tuple(messages), GenerationSettings(temperature=0.0, max_tokens=tokens, seed=1),
                       keep_state=keep_state)
    text = ""
    for event in backend.generate(request, control):
        if isinstance(event, Delta):
            text += event.text
        else:
            assert isinstance(event, Done)
    return text


def _chat(topic: str) -> list[ChatMessage]:
    return [ChatMessage("user", f"Tell me everything about {topic}. " * 12)]


def _reopened(model: Path, folder: Path, context: int = 1024) -> tuple[str, str, str]:
    """Chat A, then chat B, then A's follow-up: (restored from, its text) with saved states,
    and the follow-up's text from an engine that went on from A in memory."""
    first = _chat("kestrels")
    plain = _load(model, None, context)
    try:
        reply = _answer(plain, first)
        follow_up = first + [ChatMessage("assistant", reply), ChatMessage("user", "And their nests?")]
        in_memory = _answer(plain, follow_up)
    finally:
        plain.close()
    backend = _load(model, folder, context)
    try:
        assert _answer(backend, first) == reply
        _answer(backend, _chat("lighthouses"))
        restored = _answer(backend, follow_up)
        return backend.restored_from, restored, in_memory
    finally:
        backend.close()


@pytest.mark.parametrize("model_fixture", ["tiny_model", "small_real_model"])
def test_a_restored_state_answers_as_the_cache_it_was_taken_from(model_fixture: str, tmp_path: Path,
                                                                  request: pytest.FixtureRequest) -> None:
    model = request.getfixturevalue(model_fixture)
    source, restored, in_memory = _reopened(model, tmp_path / "states")
    assert source == "ram"
    assert restored == in_memory


def test_a_state_from_disk_gives_the_same_next_tokens_as_a_cold_evaluation(tiny_model: Path, tmp_path: Path) -> None:
    folder = tmp_path / "states"
    first = _chat("kestrels")
    backend = _load(tiny_model, folder)
    reply = _answer(backend, first)
    backend.close()  # the writer finishes its file; RAM states go with the engine
    follow_up = first + [ChatMessage("assistant", reply), ChatMessage("user", "And their nests?")]
    reopened = _load(tiny_model, folder)
    try:
        restored = _answer(reopened, follow_up, tokens=24)
        assert reopened.restored_from == "disk"
    finally:
        reopened.close()
    cold = _load(tiny_model, None)
    try:
        assert _answer(cold, follow_up, tokens=24) == restored
        assert cold.restored_from == ""
    finally:
        cold.close()


@pytest.mark.parametrize("keep", [False, True])
def test_an_answer_that_keeps_no_state_leaves_none_in_ram_or_on_disk(keep: bool, tiny_model: Path,
                                                                     tmp_path: Path) -> None:
    """A temporary chat's answers (keep_state False): no file, and nothing in RAM to restore its
    follow-up from once another chat was answered; kept, the same chat's state is in both."""
    folder = tmp_path / "states"
    first = _chat("kestrels")
    backend = _load(tiny_model, folder)
    try:
        reply = _answer(backend, first, keep_state=keep)
        _answer(backend, _chat("lighthouses"), keep_state=keep)
        _answer(backend, first + [ChatMessage("assistant", reply), ChatMessage("user", "And their nests?")])
        restored = backend.restored_from
    finally:
        backend.close()
    files = folder_usage(folder)[0]
    if keep:
        assert restored and files >= 2, "kept: the first chat's state is restored for its follow-up"
    else:
        assert restored == "" and files == 1, "only the last answer (kept) left a state"


def test_a_state_is_not_used_for_another_context(tiny_model: Path, tmp_path: Path) -> None:
    folder = tmp_path / "states"
    first = _chat("kestrels")
    backend = _load(tiny_model, folder, context=1024)
    reply = _answer(backend, first)
    backend.close()
    other = _load(tiny_model, folder, context=2048)
    try:
        _answer(other, first + [ChatMessage("assistant", reply), ChatMessage("user", "More?")])
        assert other.restored_from == ""
    finally:
        other.close()
    assert folder_usage(folder)[0] >= 1  # kept for the context it was made for


def _write(folder: Path, key: StateKey = KEY, tokens: tuple[int, ...] = TOKENS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{key.name}-test{kv_state.SUFFIX}"
    kv_state.write_file(path, key, tokens, b"state bytes" * 100, False, secret=SECRET)
    return path


def test_a_good_file_is_found_with_its_tokens_and_bytes(tmp_path: Path) -> None:
    _write(tmp_path)
    found = StateStore(KEY, tmp_path, 1 << 30, secret=SECRET).find(list(TOKENS) + [7, 8], held=0)
    assert found is not None and found.source == "disk"
    assert found.tokens == TOKENS and found.data == b"state bytes" * 100 and found.keep == len(TOKENS)


@pytest.mark.parametrize("damage", ["truncated", "random", "longer", "flipped"])
def test_a_damaged_file_is_ignored_and_removed(tmp_path: Path, damage: str) -> None:
    path = _write(tmp_path)
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[:-10])
    elif damage == "random":
        path.write_bytes(os.urandom(len(data)))
    elif damage == "longer":
        path.write_bytes(data + b"x")
    else:
        at = len(data) - kv_state.MAC_BYTES - 5  # in the state bytes
        path.write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1:])
    store = StateStore(KEY, tmp_path, 1 << 30, secret=SECRET)
    assert store.find(list(TOKENS) + [7], held=0) is None
    assert not path.exists()


@pytest.mark.parametrize("field, value", [("model", "other.gguf|1|2"), ("context_length", 4096),
                                          ("template", "another"), ("runtime", "0.4.0")])
def test_a_file_of_another_model_context_template_or_runtime_under_this_name_is_removed(
        tmp_path: Path, field: str, value: object) -> None:
    foreign = dataclasses.replace(KEY, **{field: value})
    path = _write(tmp_path, foreign)
    renamed = path.rename(tmp_path / path.name.replace(foreign.name, KEY.name))
    assert StateStore(KEY, tmp_path, 1 << 30, secret=SECRET).find(list(TOKENS) + [7], held=0) is None
    assert not renamed.exists()


def test_another_version_is_removed(tmp_path: Path) -> None:
    path = _write(tmp_path)
    data = bytearray(path.read_bytes())
    struct.pack_into("<H", data, len(kv_state.MAGIC), kv_state.STATE_VERSION + 1)
    path.write_bytes(bytes(data))
    StateStore(KEY, tmp_path, 1 << 30, secret=SECRET)
    assert not path.exists()


def test_a_file_of_another_key_is_left_alone_and_not_used(tmp_path: Path) -> None:
    path = _write(tmp_path, dataclasses.replace(KEY, context_length=4096))
    assert StateStore(KEY, tmp_path, 1 << 30, secret=SECRET).find(list(TOKENS) + [7], held=0) is None
    assert path.exists()


def test_a_half_written_temporary_file_is_never_read(tmp_path: Path) -> None:
    path = _write(tmp_path)
    temporary = path.with_name(path.name + ".123.tmp")
    path.rename(temporary)
    assert StateStore(KEY, tmp_path, 1 << 30, secret=SECRET).find(list(TOKENS) + [7], held=0) is None


def test_the_least_recently_used_files_go_first(tmp_path: Path) -> None:
    paths = []
    for i in range(3):
        path = _write(tmp_path, tokens=tuple(range(i + 1, 300)))
        paths.append(path.rename(tmp_path / f"{KEY.name}-{i}{kv_state.SUFFIX}"))
        os.utime(paths[-1], (1000 + i, 1000 + i))
    size = paths[0].stat().st_size
    evict_to_budget(tmp_path, 2 * size)
    assert [p.exists() for p in paths] == [False, True, True]


def test_a_later_state_of_the_same_chat_replaces_the_earlier_one(tmp_path: Path) -> None:
    store = StateStore(KEY, tmp_path, 1 << 30, secret=SECRET)
    store.save(TOKENS, b"a" * 100, False)
    store.save(TOKENS + (5, 6), b"b" * 100, False)
    store.close()
    assert folder_usage(tmp_path)[0] == 1
    found = StateStore(KEY, tmp_path, 1 << 30, secret=SECRET).find(list(TOKENS) + [5, 6, 9], held=0)
    assert found is not None and found.data == b"b" * 100


def test_a_sliding_window_chat_keeps_its_earlier_state_for_a_regenerate(tmp_path: Path) -> None:
    store = StateStore(KEY, tmp_path, 1 << 30, secret=SECRET)
    store.save(TOKENS, b"a" * 100, True)
    store.save(TOKENS + (5, 6), b"b" * 100, True)
    store.close()
    reopened = StateStore(KEY, tmp_path, 1 << 30, secret=SECRET)
    # Regenerating the last answer: the prompt goes on from the earlier state, not the later one.
    found = reopened.find(list(TOKENS) + [7, 8], held=0)
    assert folder_usage(tmp_path)[0] == 2
    assert found is not None and found.data == b"a" * 100


def test_a_sliding_window_state_is_used_only_to_continue_where_it_ended(tmp_path: Path) -> None:
    store = StateStore(KEY, None, 0)
    store.save(TOKENS, b"window" * 10, True)
    assert store.find(list(TOKENS[:-3]) + [9] * 50, held=0) is None
    assert store.find(list(TOKENS) + [9], held=0) is not None
