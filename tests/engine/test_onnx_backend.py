"""The ONNX backend on real ONNX Runtime GenAI, with the tiny model in tests/fixtures/tiny-onnx.

The tiny model never ends an answer by itself and only ever writes whole printable
pieces (scripts/make_tiny_onnx_model.py says how), so answers end at max_tokens, at a
stop string, or when cancelled.
"""

from __future__ import annotations

import queue
import shutil
import threading
import time
from multiprocessing import Pipe
from pathlib import Path
from typing import Iterator

import pytest

og = pytest.importorskip("onnxruntime_genai")

from app.core.generation import GenerationSettings  # noqa: E402
from app.engine import protocol as p  # noqa: E402
from app.engine.backends.backend import DeviceChoice  # noqa: E402
from app.engine.control import GenerationControl  # noqa: E402
from app.engine.errors import ContextOverflow, ModelLoadError  # noqa: E402
from app.engine.failures import BadModelFile, OnnxRefused, OnnxTrouble, ProviderMissing  # noqa: E402
from app.engine.backends.onnx.onnx_backend import OnnxBackend  # noqa: E402
from app.engine.process import EngineLoop  # noqa: E402
from app.engine.protocol import ChatMessage, Delta, Done, Generate, Load  # noqa: E402
from app.library.model_files.gguf_info import ModelFileError  # noqa: E402
from app.library.model_files.model_format import ModelFolderError  # noqa: E402

TINY_ONNX = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-onnx"
STATS_KEYS = {
    "ttft_ms", "tokens", "tokens_per_s", "prompt_tokens", "prompt_tokens_evaluated", "device",
    "finish_reason", "chat_format", "total_ms", "messages_left_out", "template_note", "thinking_ms", "threads",
}
QUESTION = (ChatMessage("user", "Say something long."),)
# Where loading would have put it: the backend reports what it is told.
CPU = DeviceChoice("CPU (ONNX Runtime)", "CPU: the model was built for the CPU only")


@pytest.fixture(scope="module")
def backend() -> Iterator[OnnxBackend]:
    loaded = OnnxBackend.load(Load(request_id=1, model_path=str(TINY_ONNX)), CPU)
    yield loaded
    loaded.close()


@pytest.fixture
def onnx_copy(tmp_path: Path) -> Path:
    return Path(shutil.copytree(TINY_ONNX, tmp_path / "tiny onnx ü"))


def _ask(request_id: int, messages: tuple[ChatMessage, ...] = QUESTION, *, stop: tuple[str, ...] = (),
         trim_history: bool = False, **settings) -> Generate:
    return Generate(request_id, messages, GenerationSettings(**settings), stop, trim_history)


def _control(request_id: int) -> GenerationControl:
    control = GenerationControl()
    control.begin(request_id)
    return control


def _answer(backend: OnnxBackend, request: Generate) -> tuple[list[str], Done]:
    events = list(backend.generate(request, _control(request.request_id)))
    *deltas, done = events
    assert all(isinstance(d, Delta) and d.request_id == request.request_id for d in deltas)
    assert isinstance(done, Done)
    return [d.text for d in deltas], done


def test_loads_on_the_cpu(backend: OnnxBackend) -> None:
    loaded = backend.loaded

    assert loaded.device == "CPU (ONNX Runtime)"
    assert loaded.architecture == "llama"
    assert loaded.chat_format == "embedded"
    assert loaded.context_length == 2048
    assert loaded.threads >= 1
    assert loaded.model_path == str(TINY_ONNX)
    assert loaded.load_ms > 0


def test_context_is_capped_by_the_model_and_asked_for() -> None:
    small = OnnxBackend.load(Load(request_id=1, model_path=str(TINY_ONNX), context_length=512, threads=1), CPU)
    big = OnnxBackend.load(Load(request_id=2, model_path=str(TINY_ONNX), context_length=100_000), CPU)

    assert (small.loaded.context_length, small.loaded.threads) == (512, 1)
    assert big.loaded.context_length == 2048


def test_streams_whole_text_and_reports(backend: OnnxBackend) -> None:
    texts, done = _answer(backend, _ask(7, max_tokens=60, seed=1))

    assert texts and all(texts)
    assert "\ufffd" not in "".join(texts)
    assert done.finish_reason == "length"
    assert set(done.stats.to_dict()) == STATS_KEYS
    stats = done.stats
    assert stats.tokens == 60
    assert stats.finish_reason == "length"
    assert stats.device == "CPU (ONNX Runtime)"
    assert stats.chat_format == "embedded"
    assert stats.messages_left_out == 0
    # No KV cache is kept between turns: the whole prompt is evaluated every time.
    assert stats.prompt_tokens_evaluated == stats.prompt_tokens > 0
    assert stats.tokens_per_s > 0
    assert 0 < stats.ttft_ms <= stats.total_ms


def test_same_seed_same_answer(backend: OnnxBackend) -> None:
    request = _ask(3, max_tokens=40, seed=11)

    first, _ = _answer(backend, request)
    again, _ = _answer(backend, request)
    other, _ = _answer(backend, _ask(4, max_tokens=40, seed=12))

    assert "".join(first) == "".join(again)
    assert "".join(first) != "".join(other)


def test_greedy_when_temperature_is_zero(backend: OnnxBackend) -> None:
    request = _ask(5, max_tokens=20, temperature=0.0, top_k=0)

    first, _ = _answer(backend, request)
    again, _ = _answer(backend, _ask(6, max_tokens=20,
                                         temperature=0.0, seed=99))

    assert "".join(first) == "".join(again)


def test_stop_string_ends_the_answer_before_it(backend: OnnxBackend) -> None:
    free, _ = _answer(backend, _ask(8, max_tokens=80, seed=5))
    text = "".join(free)
    stop = text[30:34]
    expected = text[:text.index(stop)]

    stopped, done = _answer(backend, _ask(9, max_tokens=80,
                                              seed=5, stop=(stop,)))

    assert "".join(stopped) == expected
    assert done.finish_reason == "stop"
    assert done.stats.tokens < 80


def test_emoji_split_across_tokens_comes_out_whole(backend: OnnxBackend) -> None:
    tokens = backend._tokenize("x🦜y")
    assert len(tokens) == 5  # "🦜" has no token of its own: three pieces, none valid alone

    piece = backend.token_text()

    assert [piece(t) for t in tokens] == [b"x", b"", b"", "🦜".encode(), b"y"]


def test_cancel_from_another_thread(backend: OnnxBackend) -> None:
    control = _control(21)
    seen = 0
    done = None
    for event in backend.generate(_ask(21, max_tokens=1500), control):
        if isinstance(event, Done):
            done = event
            break
        seen += 1
        if seen == 3:
            canceller = threading.Thread(target=control.cancel_request, args=(21,))
            canceller.start()
            canceller.join()

    assert done is not None and done.finish_reason == "cancelled"
    assert done.stats.finish_reason == "cancelled"
    # Cancel takes effect between two tokens: nothing after the token in hand.
    assert seen <= done.stats.tokens <= seen + 1


def test_cancel_before_the_answer_starts(backend: OnnxBackend) -> None:
    control = GenerationControl()
    control.cancel_request(22)
    control.begin(22)

    events = list(backend.generate(_ask(22), control))

    assert [type(e) for e in events] == [Done]
    assert events[0].finish_reason == "cancelled"
    assert events[0].stats.tokens == 0


def _run_in_thread(backend: OnnxBackend, request: Generate, control: GenerationControl):
    events: queue.Queue = queue.Queue()

    def run() -> None:
        for event in backend.generate(request, control):
            events.put(event)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    return worker, events


def _drain(events: queue.Queue) -> list:
    out = []
    while True:
        try:
            out.append(events.get_nowait())
        except queue.Empty:
            return out


def test_pause_holds_the_answer_until_resume(backend: OnnxBackend) -> None:
    control = _control(31)
    worker, events = _run_in_thread(
        backend, _ask(31, max_tokens=400), control)
    first = events.get(timeout=10)
    assert isinstance(first, Delta)

    control.pause()
    time.sleep(0.2)  # the token in hand may still arrive
    before = _drain(events)
    time.sleep(0.3)

    assert _drain(events) == []
    assert worker.is_alive()
    assert not any(isinstance(e, Done) for e in before)

    control.resume()
    worker.join(timeout=30)
    rest = before + _drain(events)
    assert isinstance(rest[-1], Done) and rest[-1].finish_reason == "length"
    assert rest[-1].stats.tokens == 400


def test_cancel_while_paused(backend: OnnxBackend) -> None:
    control = _control(32)
    worker, events = _run_in_thread(
        backend, _ask(32, max_tokens=400), control)
    events.get(timeout=10)
    control.pause()
    time.sleep(0.1)

    control.cancel_request(32)
    worker.join(timeout=10)

    done = _drain(events)[-1]
    assert isinstance(done, Done) and done.finish_reason == "cancelled"


def test_answer_is_cut_at_the_context(onnx_copy: Path) -> None:
    small = OnnxBackend.load(Load(request_id=1, model_path=str(onnx_copy), context_length=256), CPU)

    texts, done = _answer(small, _ask(2, max_tokens=1000, seed=2))

    assert done.finish_reason == "context"
    assert done.stats.tokens + done.stats.prompt_tokens == 256


def test_prompt_longer_than_the_context(onnx_copy: Path) -> None:
    small = OnnxBackend.load(Load(request_id=1, model_path=str(onnx_copy), context_length=256), CPU)
    long = (ChatMessage("user", "hello world " * 200),)

    with pytest.raises(ContextOverflow) as caught:
        list(small.generate(_ask(2, long), _control(2)))

    assert caught.value.context_length == 256
    assert caught.value.prompt_tokens > 256


def test_oldest_turns_left_out_when_asked(onnx_copy: Path) -> None:
    small = OnnxBackend.load(Load(request_id=1, model_path=str(onnx_copy), context_length=256), CPU)
    turns = [ChatMessage("system", "You are brief.")]
    for number in range(30):
        turns += [ChatMessage("user", f"question {number} about the quick brown fox"),
                  ChatMessage("assistant", "the lazy dog is a good dog")]
    turns.append(ChatMessage("user", "last question"))

    _, done = _answer(small, _ask(2, tuple(turns), max_tokens=20,
                                      trim_history=True))

    assert done.finish_reason == "length"
    assert done.stats.messages_left_out > 0
    assert done.stats.prompt_tokens + 20 <= 256


def test_builtin_format_without_a_template(onnx_copy: Path) -> None:
    config = onnx_copy / "tokenizer_config.json"
    config.write_text(config.read_text(encoding="utf-8").replace('"chat_template"', '"unused"'),
                      encoding="utf-8")
    plain = OnnxBackend.load(Load(request_id=1, model_path=str(onnx_copy)), CPU)

    _, done = _answer(plain, _ask(2, max_tokens=5))

    assert plain.loaded.chat_format == "builtin"
    assert done.stats.chat_format == "chatml"


def test_reset_keeps_the_model(backend: OnnxBackend) -> None:
    backend.reset()

    _, done = _answer(backend, _ask(41, max_tokens=5))

    assert done.stats.tokens == 5


def test_broken_folder_is_a_model_file_error(onnx_copy: Path) -> None:
    (onnx_copy / "tokenizer.json").unlink()

    with pytest.raises(ModelFolderError) as caught:
        OnnxBackend.load(Load(request_id=1, model_path=str(onnx_copy)), CPU)

    assert isinstance(caught.value, ModelFileError)
    assert caught.value.kind == "no_tokenizer"


def test_missing_weights_data(onnx_copy: Path) -> None:
    (onnx_copy / "model.onnx.data").unlink()

    with pytest.raises(ModelLoadError) as caught:
        OnnxBackend.load(Load(request_id=1, model_path=str(onnx_copy)), CPU)

    failure = caught.value.failure
    assert isinstance(failure, OnnxRefused) and failure.trouble == OnnxTrouble.MISSING_WEIGHTS
    assert failure.kind == p.ErrorKind.MODEL_LOAD
    assert "Download the model again" in caught.value.message
    assert "model.onnx.data" in caught.value.message


def test_truncated_weights_data(onnx_copy: Path) -> None:
    data = onnx_copy / "model.onnx.data"
    data.write_bytes(data.read_bytes()[:1000])

    with pytest.raises(ModelLoadError) as caught:
        OnnxBackend.load(Load(request_id=1, model_path=str(onnx_copy)), CPU)

    failure = caught.value.failure
    assert isinstance(failure, OnnxRefused) and failure.trouble == OnnxTrouble.MISSING_WEIGHTS
    assert "Download the model again" in caught.value.message


def test_damaged_model_file(onnx_copy: Path) -> None:
    (onnx_copy / "model.onnx").write_bytes(b"not a model" * 10)

    with pytest.raises(ModelLoadError) as caught:
        OnnxBackend.load(Load(request_id=1, model_path=str(onnx_copy)), CPU)

    failure = caught.value.failure
    assert isinstance(failure, OnnxRefused) and failure.trouble == OnnxTrouble.MODEL
    assert "download it again" in caught.value.message


def test_model_type_this_runtime_does_not_know(onnx_copy: Path) -> None:
    config = onnx_copy / "genai_config.json"
    config.write_text(config.read_text(encoding="utf-8").replace('"llama"', '"llama99"'),
                      encoding="utf-8")

    with pytest.raises(ModelLoadError) as caught:
        OnnxBackend.load(Load(request_id=1, model_path=str(onnx_copy)), CPU)

    assert "llama99" in caught.value.message
    assert "update Kestrel" in caught.value.message


def test_unknown_provider_is_a_bug() -> None:
    with pytest.raises(ValueError):
        OnnxBackend.load(Load(request_id=1, model_path=str(TINY_ONNX)), CPU, execution_provider="tpu")


@pytest.mark.skipif(og.is_dml_available(), reason="this ONNX Runtime GenAI has DirectML")
def test_provider_this_build_lacks() -> None:
    with pytest.raises(ModelLoadError) as caught:
        OnnxBackend.load(Load(request_id=1, model_path=str(TINY_ONNX)), CPU, execution_provider="dml")

    failure = caught.value.failure
    assert isinstance(failure, OnnxRefused) and failure.trouble == OnnxTrouble.DEVICE
    assert "GPU (DirectML)" in caught.value.message
    assert "choose another device" in caught.value.message


def test_loaded_and_every_answer_say_the_device_loading_chose() -> None:
    choice = DeviceChoice("CPU (ONNX Runtime)", "CPU: the fall-back", ("GPU: Radeon: out of memory",))
    loaded = OnnxBackend.load(Load(request_id=1, model_path=str(TINY_ONNX)), choice, execution_provider="cpu")

    assert (loaded.loaded.device, loaded.loaded.placement_reason, loaded.loaded.fallback_reasons) == (
        choice.device, choice.reason, choice.fallback_reasons)
    _, done = _answer(loaded, _ask(2, max_tokens=3))
    assert done.stats.device == choice.device


class _LoopHarness:
    """The engine's real request loop on a thread, over a real pipe: loading picks the
    ONNX backend for a model folder and places it on this machine."""

    def __init__(self) -> None:
        self.ui, engine_end = Pipe()
        self._thread = threading.Thread(target=EngineLoop(engine_end).run, daemon=True)
        self._thread.start()
        assert isinstance(self.ui.recv(), p.Hello)

    def send(self, request) -> None:
        self.ui.send(request)

    def recv(self, timeout: float = 30):
        assert self.ui.poll(timeout)
        return self.ui.recv()

    def close(self) -> None:
        self.ui.send(p.Shutdown(99))
        while not isinstance(self.recv(), p.Ack):
            pass
        self._thread.join(timeout=10)


@pytest.fixture
def loop() -> Iterator[_LoopHarness]:
    harness = _LoopHarness()
    yield harness
    harness.close()


def test_through_the_request_loop(loop: _LoopHarness, onnx_copy: Path) -> None:
    loop.send(Load(request_id=1, model_path=str(onnx_copy)))
    loaded = loop.recv()
    assert isinstance(loaded, p.Loaded)
    # Loading chose the device and wrote its words once; every answer repeats them.
    assert loaded.device == "CPU (ONNX Runtime)" and loaded.placement_reason.startswith("CPU: ")

    loop.send(_ask(2, max_tokens=1500))
    first = loop.recv()
    assert isinstance(first, Delta)
    loop.send(p.Cancel(request_id=2))
    event = first
    while not isinstance(event, Done):
        event = loop.recv()
    assert event.finish_reason == "cancelled" and event.stats.device == loaded.device

    (onnx_copy / "genai_config.json").write_text("{", encoding="utf-8")
    loop.send(Load(request_id=3, model_path=str(onnx_copy)))
    error = loop.recv()
    assert isinstance(error, p.Error)
    assert error.kind == p.ErrorKind.MODEL_FILE
    assert isinstance(error.failure, BadModelFile) and error.failure.problem == "bad_config"
    assert "genai_config.json" in error.failure.reason


def test_plugin_providers_reach_genai_once_and_a_refusal_is_a_load_error(monkeypatch) -> None:
    # Windows ML's libraries exist only on Windows: a stand-in records the calls.
    from app.engine.backends.onnx import onnx_backend

    calls = []

    def register(name: str, path: str) -> None:
        if name == "QNNExecutionProvider":
            raise RuntimeError("driver too old")
        calls.append((name, path))

    monkeypatch.setattr(onnx_backend.og, "register_execution_provider_library", register)
    monkeypatch.setattr(onnx_backend, "_plugin_providers", set())
    libraries = [("OpenVINOExecutionProvider", r"C:\Program Files\WindowsApps\ov ep\onnxruntime_providers_openvino.dll")]
    onnx_backend.register_plugin_providers(libraries)
    onnx_backend.register_plugin_providers(libraries)
    assert calls == libraries
    with pytest.raises(onnx_backend.ModelLoadError) as refused:
        onnx_backend.register_plugin_providers([("QNNExecutionProvider", r"C:\qnn.dll")])
    assert refused.value.failure == ProviderMissing("QNNExecutionProvider", "driver too old")
    assert "driver too old" in refused.value.message
