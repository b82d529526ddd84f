"""Shared fixtures: an isolated Kestrel home per test, the tiny model, the starter model, and
local HTTP servers for downloads."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

# Set before anything imports Qt: there is no display in CI.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from tests.helpers.http_servers import TestServer, running_server  # noqa: E402
from tests.helpers.models import STARTER_PACKAGE, build_starter, build_tiny  # noqa: E402
from tests.helpers.thinking_gguf import build_thinking_gguf  # noqa: E402


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
def starter_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real Gemma 3 270M starter model, assembled once per test session."""
    pytest.importorskip(STARTER_PACKAGE, reason="the starter package is not installed")
    return build_starter(tmp_path_factory.mktemp("starter"))


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
