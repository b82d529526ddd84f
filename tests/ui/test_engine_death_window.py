"""Issue 35 item 2 in the window: llama.cpp's engine killed mid-answer costs that answer only.

The other front ends' cases, and the window's that were already there, are listed in
tests/redteam/test_engine_death.py.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.core.conversation import MessageState, Role
from app.core.generation import GenerationSettings
from app.core.store.history import HistoryStore
from tests.helpers.tiny_gguf import build_tiny_gguf
from tests.ui.conftest import idle, run, service_of, stored, until, with_generation

LONG_CONTEXT = 32768
# An answer that runs until a 32k context is full: still running when the test kills it.
ENDLESS = GenerationSettings(max_tokens=100_000, temperature=0.8, context_length=LONG_CONTEXT)


@pytest.fixture(scope="module")
def long_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model, made for a 32k context."""
    return build_tiny_gguf(tmp_path_factory.mktemp("long") / "long tiny.gguf", n_ctx_train=LONG_CONTEXT)


def _type_and_send(qtbot, window, text: str) -> None:
    qtbot.keyClicks(window.composer.edit, text)
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)


def _last(window):
    return window.adapter.messages.messages()[-1]


def _answer_length(window) -> int:
    rows = window.adapter.messages.messages()
    return len(rows[-1].text) if rows and rows[-1].role == Role.ASSISTANT else 0


@pytest.mark.skipif(os.name == "nt", reason="SIGKILL stands in for a native crash")
def test_engine_killed_mid_answer_keeps_the_shown_text_and_the_next_message_gets_a_new_engine(
        make_window, loop, qtbot, long_model: Path) -> None:
    window = make_window(model=long_model, generation=ENDLESS)
    _type_and_send(qtbot, window, "Keep talking")
    run(loop, until(lambda: _answer_length(window) > 30, what="some text"))
    first_pid = service_of(window).session.client.pid
    os.kill(first_pid, signal.SIGKILL)
    run(loop, until(idle(window), what="the engine's death to be noticed"))
    cut = _last(window)
    assert cut.state == MessageState.INTERRUPTED and len(cut.text) > 30
    kept = stored(loop, window, HistoryStore.get_message, cut.id)
    assert (kept.state, kept.text) == (MessageState.INTERRUPTED, cut.text)
    assert window.banner_row.isVisible() and "stopped unexpectedly" in window.banner.text()

    with_generation(window, loop, max_tokens=8)
    _type_and_send(qtbot, window, "Are you back?")
    run(loop, until(lambda: idle(window)() and _last(window).id != cut.id, what="the next answer"))
    answer = _last(window)
    assert answer.state == MessageState.COMPLETE and answer.text
    assert service_of(window).session.client.pid not in (None, first_pid)
    run(loop, until(lambda: not window.banner_row.isVisible(), what="the banner to go"))
    rows = window.adapter.messages.messages()
    assert [(m.role, m.text) for m in rows[:2]] == [(Role.USER, "Keep talking"), (Role.ASSISTANT, cut.text)]
