"""Kestrel's log (the Logs folder About names): written by the window's process, never with what was said."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
from pathlib import Path

import pytest
from PySide6.QtCore import QObject, Qt, QUrl, Slot
from PySide6.QtGui import QAction, QDesktopServices

from app.core.app_log import LOG_FILE, without_private
from app.core.generation import GenerationSettings
from app.core.paths import data_paths
from tests.helpers.tiny_gguf import build_tiny_gguf
from tests.ui.conftest import idle, run, service_of, until
from tests.ui.test_server_live import free_port

SECRET = "Marmalade7Zeppelin"
# Shaped like a key some provider gives, typed into a chat as people do paste them.
PASTED_KEY = "sk-proj-Qm9vZ2xlZGVkb29kbGVzNjQ4OTIxMDk"
LONG_CONTEXT = 32768


@pytest.fixture(scope="module")
def long_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model, made for a 32k context: an answer still running when the test kills the engine."""
    return build_tiny_gguf(tmp_path_factory.mktemp("long") / "long tiny.gguf", n_ctx_train=LONG_CONTEXT)


def _log_text() -> str:
    path = data_paths().logs / LOG_FILE
    return path.read_text(encoding="utf-8") if path.exists() else ""


def _chat_over_api(port: int, key: str, model: str) -> str:
    from openai import OpenAI

    with OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key, max_retries=0) as client:
        answer = client.chat.completions.create(model=model, max_tokens=8, messages=[
            {"role": "user", "content": f"The password is {SECRET}; my key is {PASTED_KEY}."}])
    return answer.choices[0].message.content or ""


@pytest.mark.skipif(os.name == "nt", reason="SIGKILL stands in for a native crash")
@pytest.mark.slow
def test_the_log_holds_what_happened_and_none_of_what_was_said_or_any_key(make_window, loop, qtbot,
                                                                          long_model: Path) -> None:
    window = make_window(model=long_model, generation=GenerationSettings(
        max_tokens=100_000, temperature=0.8, context_length=LONG_CONTEXT))
    doors = window.doors
    port = free_port()
    settings = doors.settings.settings
    run(loop, doors.settings.update_settings(dataclasses.replace(
        settings, server=dataclasses.replace(settings.server, enabled=True, port=port))))
    run(loop, window.server.follow())
    key = doors.settings.settings.server.key
    try:
        run(loop, asyncio.to_thread(_chat_over_api, port, key, doors.settings.settings.default_model))
        qtbot.keyClicks(window.composer.edit, f"Remember {SECRET} and {PASTED_KEY} for me")
        qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)
        rows = window.adapter.messages.messages
        run(loop, until(lambda: len(rows()) == 2 and len(rows()[-1].text) > 20, what="some text"))
        os.kill(service_of(window).session.client.pid, signal.SIGKILL)
        run(loop, until(idle(window), what="the engine's death to be noticed"))
    finally:
        run(loop, window.server.stop())
    window.log.server_changed("")  # what the window says when the server stops
    logged = _log_text()
    assert "ready on CPU" in logged  # the model, where it ran
    assert f"API server: API on 127.0.0.1:{port}" in logged and "API server: off" in logged
    assert "API /v1/chat/completions from 127.0.0.1:" in logged and ": 200, model" in logged
    assert "the engine died during an answer" in logged
    assert "problem (engine)" in logged
    # The chat's title (its first message) was in the window's title: never in the log.
    assert SECRET in window.windowTitle()
    assert SECRET not in logged and PASTED_KEY not in logged and key not in logged


def test_a_problem_is_logged_without_the_quoted_title_or_a_key() -> None:
    said = (f"The chat in /tmp/a.json was imported as “Tell me {SECRET}”, but 2 parts were left out; "
            f"the server refused {PASTED_KEY} and kst-{'x' * 40}.")
    kept = without_private(said)
    assert SECRET not in kept and PASTED_KEY not in kept and "kst-" not in kept
    assert kept.startswith("The chat in /tmp/a.json was imported as “…”, but 2 parts were left out")


class _FileOpener(QObject):
    """Qt's own hook for file URLs (QDesktopServices.setUrlHandler): what the desktop would be asked to open."""

    def __init__(self) -> None:
        super().__init__()
        self.opened: list[QUrl] = []

    @Slot(QUrl)
    def open(self, url: QUrl) -> None:
        self.opened.append(url)


def test_help_open_logs_opens_the_log_folder_where_the_log_is(make_window) -> None:
    window = make_window(model=None, start=False)
    opener = _FileOpener()
    QDesktopServices.setUrlHandler("file", opener, "open")
    try:
        action = window.findChild(QAction, "openLogs")
        assert action is not None and "Open logs" in action.text().replace("&", "")
        action.trigger()
    finally:
        QDesktopServices.unsetUrlHandler("file")
    assert [Path(url.toLocalFile()) for url in opener.opened] == [data_paths().logs]
    assert (data_paths().logs / LOG_FILE).is_file()
