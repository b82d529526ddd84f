"""Shared fixtures: an isolated Kestrel home per test, the tiny model, a small real model, the
starter model, local HTTP servers for downloads, and a private PulseAudio for the audio tests."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Iterator

import pytest

# Set before anything imports Qt: there is no display in CI.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# Remote servers' keys (app/library/servers/keys.py) go to the file fallback in tests, in this process and
# every Kestrel it starts alike: never into a contributor's own credential store, and never into one only
# this process has. keyring picks its backend once, among every KeyringBackend class defined so far, so
# after tests/library/test_server_keys.py defines its in-memory store, an unpinned keyring chains it in:
# keys "kept" there never reach the engine process (the remote tests then saw no key sent). That file
# sets its stores by hand.
os.environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"

# A run started in the background by a script (`… &` without job control) inherits Ctrl+C
# ignored, and so would every Kestrel a test starts: the tests of Ctrl+C (exit 130, a download
# that keeps its part) need it as a terminal gives it. A handler here is reset to the default
# in each child at exec; an ignored signal would stay ignored.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from tests.helpers.http_servers import TestServer, running_server  # noqa: E402
from tests.helpers.pulse import PulseServer, pulse_server  # noqa: E402
from tests.helpers.models import SMALL_REAL_PACKAGE, build_instruct, build_small_real, build_starter, build_tiny  # noqa: E402
from tests.helpers.thinking_gguf import build_thinking_gguf  # noqa: E402

# Shared workers (pytest-xdist, scripts/test.py): a file is a unit of work, the long ones start first.
pytest_plugins = ["tests.helpers.workers"]


@pytest.fixture(autouse=True)
def kestrel_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own data, config, cache and log folders."""
    home = tmp_path / "kestrel home ü"  # a space and a non-ASCII letter, as on real machines
    monkeypatch.setenv("KESTREL_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny llama-architecture GGUF with random weights that real llama.cpp runs."""
    return build_tiny(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def thinking_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny scripted GGUF that thinks between <think> markers, then answers."""
    return build_thinking_gguf(tmp_path_factory.mktemp("thinker") / "thinker.gguf")


@pytest.fixture(scope="session")
def small_real_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Gemma 3 270M (the old starter, a base model), assembled once per test session: a real
    model for the pipeline tests, which need real weights but not good answers."""
    pytest.importorskip(SMALL_REAL_PACKAGE, reason="the small real model's package (the test extra) is not installed")
    return build_small_real(tmp_path_factory.mktemp("small real"))


@pytest.fixture(scope="session")
def instruct_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Qwen2.5-Coder 0.5B Instruct, a real instruct model half the starter's size, assembled once
    per session by app.library.starter from its chunk packages (the `test` extra)."""
    path = build_instruct(tmp_path_factory.mktemp("instruct"))
    if path is None:
        pytest.skip("Qwen2.5-Coder 0.5B's chunk packages (the test extra) are not installed")
    return path


@pytest.fixture(scope="session")
def starter_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The starter model, Qwen2.5-Coder 1.5B Instruct, assembled once per session by
    app.library.starter from its chunk packages (the `starter` extra)."""
    path = build_starter(tmp_path_factory.mktemp("starter"))
    if path is None:
        pytest.skip("the starter's chunk packages (the starter extra) are not installed")
    return path


@pytest.fixture
def server() -> Iterator[TestServer]:
    """A real HTTP server on 127.0.0.1 whose files a test sets (tests/helpers/http_servers.py)."""
    with running_server() as state:
        yield state


@pytest.fixture
def storage() -> Iterator[TestServer]:
    """A second host, as Hugging Face's storage is a host of its own."""
    with running_server() as state:
        yield state


@pytest.fixture
def pulse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PulseServer]:
    """A private PulseAudio with a null sink as the speaker and its monitor as the microphone; this
    process's PortAudio reaches it through ALSA's pulse device (tests/helpers/pulse.py)."""
    with pulse_server(tmp_path / "pulse") as server:
        monkeypatch.setenv("PULSE_SERVER", server.address)
        yield server


@pytest.fixture
def pulse_without_devices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PulseServer]:
    """A private PulseAudio with no sink and no source: a PC with no microphone and no speaker."""
    with pulse_server(tmp_path / "pulse-empty", with_speaker=False) as server:
        monkeypatch.setenv("PULSE_SERVER", server.address)
        yield server
