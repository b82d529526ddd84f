"""Counting tokens with the loaded model's own tokenizer, and beside a running answer (app/engine/counting.py)."""

from __future__ import annotations

import pickle
import threading
import time
from multiprocessing import Pipe
from pathlib import Path
from typing import Iterator

import llama_cpp
import pytest

from app.core.generation import GenerationSettings
from app.engine import protocol as p
from app.engine.backends.backend import DeviceChoice
from app.engine.control import GenerationControl
from app.engine.counting import ModelGate
from app.engine.failures import NoModel
from app.engine.backends.llama.gguf_backend import GgufBackend
from app.engine.process import EngineLoop
from app.engine.protocol import ChatMessage, Done, Generate, Load

TINY_ONNX = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-onnx"
CPU = DeviceChoice("CPU")
# Empty, plain, non-ASCII (split across tokens), a special token's text, long.
TEXTS = ("", "Hello there", "  leading spaces, ü, 你好, 🦅 and\nnew lines", "a <|im_end|> marker",
         "lorem ipsum dolor " * 400)
CHAT = (ChatMessage("system", "Be brief."), ChatMessage("user", "Hello there"),
        ChatMessage("assistant", "Hi! What can I do?"), ChatMessage("user", "Count these words, ü 🦅."))
ENDLESS = GenerationSettings(max_tokens=1500, temperature=0.0, seed=1)


def _reference(model: Path) -> llama_cpp.Llama:
    """llama.cpp's own tokenizer for the file, loaded apart from the backend (vocabulary only)."""
    return llama_cpp.Llama(str(model), vocab_only=True, verbose=False)


def _prompt_tokens(backend: GgufBackend | object, messages: tuple[ChatMessage, ...]) -> int:
    """How many prompt tokens an answer to these messages reports (Done.stats)."""
    events = list(backend.generate(Generate(9, messages, GenerationSettings(max_tokens=2, temperature=0.0)),  # type: ignore[attr-defined]
                                   GenerationControl()))
    done = events[-1]
    assert isinstance(done, Done)
    return done.stats.prompt_tokens


@pytest.fixture(scope="module")
def tiny(tiny_model: Path) -> Iterator[GgufBackend]:
    backend = GgufBackend.load(Load(1, str(tiny_model), context_length=4096, threads=1), CPU)
    yield backend
    backend.close()


def test_counts_cross_the_pipe_whole() -> None:
    messages = [p.CountTokens(1, "ü <|im_end|>"), p.CountTokens(2, messages=CHAT, thinking=False), p.TokenCount(2, 41)]
    back = [pickle.loads(pickle.dumps(m)) for m in messages]
    assert back == messages and back[1].messages[1].role == "user" and back[0].messages is None


def test_gguf_count_is_llama_tokenize_of_the_text(tiny: GgufBackend, tiny_model: Path) -> None:
    reference = _reference(tiny_model)
    for text in TEXTS:
        # As text from outside costs inside a prompt: no BOS (this model adds one), and a
        # control token's text read as text (issue 35: only the template's markers are tokens).
        assert tiny.count_tokens(text) == len(reference.tokenize(text.encode(), add_bos=False, special=False))
    assert len(reference.tokenize(b"Hello there")) == tiny.count_tokens("Hello there") + 1  # the BOS
    assert tiny.count_tokens("<|im_end|>") == len(reference.tokenize(b"<|im_end|>", add_bos=False, special=False)) > 1


def test_gguf_prompt_count_is_what_an_answer_evaluates(tiny: GgufBackend) -> None:
    assert tiny.count_prompt(CHAT, True) == _prompt_tokens(tiny, CHAT)
    assert tiny.count_prompt(CHAT[:2], True) < tiny.count_prompt(CHAT, True)


def test_real_model_count_is_llama_tokenize(small_real_model: Path) -> None:
    backend = GgufBackend.load(Load(1, str(small_real_model), context_length=1024, threads=1), CPU)
    try:
        reference = _reference(small_real_model)
        for text in (*TEXTS, "<start_of_turn>user\n<end_of_turn>"):
            assert backend.count_tokens(text) == len(reference.tokenize(text.encode(), add_bos=False, special=False))
        assert backend.count_prompt(CHAT, True) == _prompt_tokens(backend, CHAT)
    finally:
        backend.close()


def test_onnx_count_is_its_tokenizer() -> None:
    og = pytest.importorskip("onnxruntime_genai")
    from app.engine.backends.onnx.onnx_backend import OnnxBackend

    backend = OnnxBackend.load(Load(1, str(TINY_ONNX)), CPU)
    try:
        reference = og.Tokenizer(og.Model(str(TINY_ONNX)))
        for text in TEXTS:
            if "<|im_end|>" not in text:
                assert backend.count_tokens(text) == len(reference.encode(text))
        # A control token's text from outside is text (issue 35): on this tokenizer, a token a character.
        assert backend.count_tokens("a <|im_end|> marker") == len(reference.encode("a  marker")) + len("<|im_end|>")
        assert backend.count_prompt(CHAT, True) == _prompt_tokens(backend, CHAT)
    finally:
        backend.close()


class _BosFirst:
    """The tiny model's real tokenizer, putting a BOS in front of all it encodes, as the
    tokenizers of Llama-family ONNX models do (the tiny model's adds none)."""

    def __init__(self, real: object, bos: int) -> None:
        self._real, self.bos_token_id = real, bos

    def encode(self, text: str) -> list[int]:
        return [self.bos_token_id, *self._real.encode(text)]  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._real, name)


def test_onnx_count_leaves_out_a_bos_its_tokenizer_adds() -> None:
    og = pytest.importorskip("onnxruntime_genai")
    import dataclasses

    from app.engine.backends.onnx.onnx_backend import OnnxBackend

    plain = OnnxBackend.load(Load(1, str(TINY_ONNX)), CPU)
    try:
        tokenizer = _BosFirst(plain._tokenizer, 850)
        info = dataclasses.replace(plain._info, bos_token="<|endoftext|>")
        backend = OnnxBackend(plain._model, tokenizer, info, plain.loaded)  # type: ignore[arg-type]
        reference = og.Tokenizer(og.Model(str(TINY_ONNX)))
        for text in TEXTS:
            assert backend.count_tokens(text) == plain.count_tokens(text)
            if "<|im_end|>" not in text:  # that one is read as text (issue 35), which encode cannot do
                assert backend.count_tokens(text) == len(reference.encode(text))
        assert backend.count_prompt(CHAT, True) == _prompt_tokens(backend, CHAT)
    finally:
        plain.close()


# --- through the request loop: a count does not wait behind an answer ---------------------


class _Loop:
    """The engine's request loop on a thread of this process, spoken to over a real pipe."""

    def __init__(self) -> None:
        self.ui, engine_end = Pipe()
        self._thread = threading.Thread(target=EngineLoop(engine_end).run, daemon=True)
        self._thread.start()
        assert isinstance(self.ui.recv(), p.Hello)

    def recv(self, timeout: float = 30) -> p.EngineEvent:
        assert self.ui.poll(timeout), "the engine said nothing"
        return self.ui.recv()

    def until(self, kind: type, timeout: float = 30) -> tuple[p.EngineEvent, list[p.EngineEvent]]:
        """The first event of that kind, and those that came before it."""
        before = []
        while not isinstance(event := self.recv(timeout), kind):
            before.append(event)
        return event, before

    def close(self) -> None:
        self.ui.send(p.Shutdown(99))
        self.until(p.Ack)
        self._thread.join(timeout=10)
        self.ui.close()  # in a child process the pipe closes with it; here the reader thread waits on it till then


@pytest.fixture
def loop() -> Iterator[_Loop]:
    harness = _Loop()
    yield harness
    harness.close()


def test_no_model_is_an_error_at_once(loop: _Loop) -> None:
    loop.ui.send(p.CountTokens(1, "hello"))
    error = loop.recv(timeout=5)
    assert isinstance(error, p.Error) and error.request_id == 1 and error.failure == NoModel()


@pytest.mark.parametrize("model", ["gguf", "onnx"])
def test_a_count_is_answered_while_an_answer_is_held(loop: _Loop, tiny_model: Path, model: str) -> None:
    """Paused between two tokens, the answer holds the request loop: a count queued behind
    it would wait for ever. It is answered at once, the answer then goes on whole."""
    if model == "onnx":
        pytest.importorskip("onnxruntime_genai")
    path = tiny_model if model == "gguf" else TINY_ONNX
    loop.ui.send(Load(1, str(path), context_length=2048, threads=1))
    loop.until(p.Loaded)
    loop.ui.send(Generate(2, (ChatMessage("user", "Say something long."),), ENDLESS))
    loop.until(p.Delta)
    loop.ui.send(p.Pause(3))
    loop.until(p.Ack)
    loop.ui.send(p.CountTokens(4, "Hello there"))
    loop.ui.send(p.CountTokens(5, messages=CHAT))
    started = time.perf_counter()
    first, before = loop.until(p.TokenCount, timeout=10)
    second, between = loop.until(p.TokenCount, timeout=10)
    waited = time.perf_counter() - started
    assert not any(isinstance(event, Done) for event in before + between)
    assert isinstance(first, p.TokenCount) and isinstance(second, p.TokenCount)
    assert (first.request_id, second.request_id) == (4, 5) and first.tokens > 0 and second.tokens > first.tokens
    loop.ui.send(p.Resume(6))
    done, _ = loop.until(Done)
    assert isinstance(done, Done) and done.stats.tokens == ENDLESS.max_tokens
    assert waited < 10  # the figure itself is a benchmark's business


def test_a_count_sent_after_a_load_counts_with_that_model(loop: _Loop, tiny_model: Path) -> None:
    text = "Hello there <|im_end|>"
    loop.ui.send(p.Unload(1))
    loop.ui.send(Load(2, str(tiny_model), context_length=512, threads=1))
    loop.ui.send(p.CountTokens(3, text))
    counted, before = loop.until(p.TokenCount)
    assert isinstance(counted, p.TokenCount) and counted.tokens == _reference(tiny_model).tokenize(
        text.encode(), add_bos=False, special=False).__len__()
    assert any(isinstance(event, p.Loaded) for event in before)
    loop.ui.send(p.Unload(4))
    loop.ui.send(p.CountTokens(5, text))
    error, _ = loop.until(p.Error)
    assert isinstance(error, p.Error) and error.request_id == 5 and error.failure == NoModel()


# --- the gate between counts and changes of model ----------------------------------------


def _started(target) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_counts_wait_for_an_announced_change() -> None:
    gate, counted = ModelGate(), threading.Event()
    gate.announce()

    def count() -> None:
        with gate.counting():
            counted.set()

    _started(count)
    assert not counted.wait(0.2)
    with gate.changing():
        assert not counted.is_set()
    assert counted.wait(5)


def test_a_change_waits_for_the_count_in_progress_and_the_reader_never_waits() -> None:
    gate, counting, release, changed = ModelGate(), threading.Event(), threading.Event(), threading.Event()

    def count() -> None:
        with gate.counting():
            counting.set()
            release.wait(5)

    def change() -> None:
        with gate.changing():
            changed.set()

    _started(count)
    assert counting.wait(5)
    reader = _started(gate.announce)
    reader.join(timeout=1)
    assert not reader.is_alive()  # announcing never waits for a count
    _started(change)
    assert not changed.wait(0.2)
    release.set()
    assert changed.wait(5)


def test_the_counting_thread_ends_with_the_engines_loop() -> None:
    # Each engine left its counting thread waiting for ever after Shutdown (5 of them by the end of a whole run).
    before = {thread.ident for thread in threading.enumerate() if thread.name != "MainThread"}
    harness = _Loop()
    harness.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = [t for t in threading.enumerate() if t.ident not in before and t.is_alive() and t.name != "MainThread"]
        if not left:
            break
        time.sleep(0.05)
    assert not left, f"still running: {[thread.name for thread in left]}"
