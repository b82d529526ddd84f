"""Searching Hugging Face from "Get a model": type, wait, pick a repository with the keyboard,
see its files with quantization, size and fit, download one; through a real window against a
hub served on 127.0.0.1 with the answers of tests/fixtures/hub (constructed, and one recorded)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton

from app.core.units import human_size
from app.ui.models.hub_search import MIN_CHARS, PAUSE_MS, PLACEHOLDER, QUIET, HubSearchBox
from app.ui.main_window import MainWindow
from app.ui.models.model_manager import ModelManager
from tests.helpers.http_servers import Served, TestServer, hugging_face_repo, running_server
from tests.helpers.hub_answers import EMPTY_ANSWER, RECORDED_ANSWER, search_path, serve_search
from tests.ui.conftest import run, until

REPO = "someone/Thinker-GGUF"


@pytest.fixture
def servers() -> Iterator[tuple[TestServer, TestServer]]:
    with running_server() as front, running_server() as storage:
        yield front, storage


def open_search(window: MainWindow) -> tuple[ModelManager, HubSearchBox]:
    window.show_model_manager()
    manager = window.model_manager
    assert manager is not None
    manager.tabs.setCurrentWidget(manager.catalog)
    manager.catalog.side_tabs.setCurrentWidget(manager.catalog.hub_search)
    return manager, manager.catalog.hub_search


def rows(tree) -> list[list[str]]:
    return [[tree.topLevelItem(r).text(c) for c in range(tree.columnCount())] for r in range(tree.topLevelItemCount())]


def settled(loop, box: HubSearchBox) -> None:
    run(loop, until(lambda: box.note.text() not in ("Searching…",) and not box.timer.isActive(), what="the search"))


def test_typing_searches_after_a_pause_and_a_chosen_file_downloads_and_is_installed(
        make_window, loop, qtbot, servers, thinking_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    front, storage = servers
    wanted = thinking_model.read_bytes()
    other = b"GGUF" + bytes(60)
    hugging_face_repo(front, storage, REPO, {"thinker-Q8_0.gguf": wanted, "thinker-Q2_K.gguf": other})
    path = serve_search(front, "thinker")
    monkeypatch.setenv("HF_ENDPOINT", front.base)
    window = make_window()
    manager, box = open_search(window)
    assert box.query.placeholderText() == PLACEHOLDER and box.note.text() == QUIET
    assert "only when you type" in QUIET

    qtbot.keyClicks(box.query, "thinker")
    assert front.log == [] and box.timer.isActive(), "nothing is sent while the user is typing"
    qtbot.wait(PAUSE_MS + 100)
    assert box.note.text() == "Searching…" or front.log, "asked once typing paused"
    settled(loop, box)
    assert [(e.method, e.path) for e in front.log] == [("GET", path)], "one request for the whole word"
    assert rows(box.repos) == [[REPO, "48,210", "312", "2026-09-19"],
                               ["someone-else/Thinker-Coder-GGUF", "1,907", "25", "2026-06-02"],
                               ["someone/Thinker-Large-GGUF", "0", "0", "2026-11-30"]]
    assert "Gated" in box.repos.topLevelItem(2).toolTip(0)

    qtbot.keyClick(box.query, Qt.Key.Key_Down)
    qtbot.keyClick(box.query, Qt.Key.Key_Up)
    assert box.repos.currentItem() is box.repos.topLevelItem(0)
    qtbot.keyClick(box.query, Qt.Key.Key_Return)
    run(loop, until(lambda: box.files.topLevelItemCount() == 2, what="the files"))
    assert front.log[-1].path == f"/api/models/{REPO}?blobs=true"
    shown = rows(box.files)
    assert [row[:2] + row[3:] for row in shown] == [["Q2_K", human_size(len(other)), "", "thinker-Q2_K.gguf"],
                                                     ["Q8_0", human_size(len(wanted)), "", "thinker-Q8_0.gguf"]]
    assert all(row[2].startswith("Runs well · about ") and row[2].endswith(" tokens/s here (estimated)")
               for row in shown), "a speed verdict, not the memory's alone"
    assert box.files.headerItem().text(2) == "How it runs here"
    assert "Estimated from the file size" in box.files.topLevelItem(1).toolTip(2)
    assert "Speeds are estimated from each file's size" in box.files_note.text()

    button = box.files.itemWidget(box.files.topLevelItem(1), 3)
    assert isinstance(button, QPushButton)
    button.click()
    assert manager.tabs.currentWidget() is manager.downloads
    downloads = window.adapter.downloads
    run(loop, until(lambda: [item.state for item in downloads.rows()] == ["done"], what="the download"))
    [item] = downloads.rows()
    assert item.title == "thinker-Q8_0"
    installed = window.adapter.installed
    run(loop, until(lambda: any(row.model.id == item.model_id for row in installed.rows()), what="the listing"))
    row = next(row for row in installed.rows() if row.model.id == item.model_id)
    assert row.model.path.read_bytes() == wanted and row.problem is None


def test_short_text_no_match_and_an_unreachable_hub_are_said_in_place(
        make_window, loop, qtbot, server: TestServer, monkeypatch: pytest.MonkeyPatch) -> None:
    serve_search(server, "nothing-like-it", EMPTY_ANSWER)
    monkeypatch.setenv("HF_ENDPOINT", server.base)
    window = make_window()
    _manager, box = open_search(window)

    qtbot.keyClicks(box.query, "x" * (MIN_CHARS - 1))
    qtbot.wait(PAUSE_MS + 100)
    assert server.log == [] and box.note.text() == f"Type at least {MIN_CHARS} characters to search."

    box.query.setText("nothing-like-it")
    box.search_now()
    settled(loop, box)
    assert box.note.text() == "No GGUF models match “nothing-like-it” on Hugging Face. Try fewer or other words."
    assert box.repos.isHidden()

    onnx = serve_search(server, "nothing-like-it", EMPTY_ANSWER, fmt="onnx")
    box.kind.setCurrentIndex(box.kind.findData("onnx"))  # the same words, another kind: asked again at once
    settled(loop, box)
    assert [e.path for e in server.log][-1] == onnx
    assert box.note.text() == "No ONNX models match “nothing-like-it” on Hugging Face. Try fewer or other words."
    box.kind.setCurrentIndex(box.kind.findData("gguf"))
    settled(loop, box)

    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    box.query.setText("thinker")
    box.search_now()
    settled(loop, box)
    assert box.note.text().startswith("Could not reach 127.0.0.1:9:"), box.note.text()
    assert box.repos.isHidden()

    qtbot.keyClick(box.query, Qt.Key.Key_Escape)
    assert box.query.text() == "" and box.note.text() == QUIET
    assert len(server.requests("GET", search_path("nothing-like-it"))) == 2, "GGUF, ONNX, GGUF again: no cache"


def test_a_recorded_answer_of_the_real_hub_lists_every_repository(
        make_window, loop, qtbot, server: TestServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface.co's own answer (recorded: tests/fixtures/hub/README.md), in the hub's order,
    with fields Kestrel does not ask for and without the ones it does not need."""
    serve_search(server, "gemma", RECORDED_ANSWER)
    monkeypatch.setenv("HF_ENDPOINT", server.base)
    window = make_window()
    _manager, box = open_search(window)

    qtbot.keyClicks(box.query, "gemma")
    settled(loop, box)

    shown = rows(box.repos)
    assert [row[0] for row in shown] == [item["id"] for item in json.loads(RECORDED_ANSWER.read_bytes())]
    assert shown[6] == ["ornith-ai/Ornith-1.0-9B-GGUF", "4,567,553", "615", "2026-06-25"]
    assert box.note.text().startswith("10 repositories hold GGUF models matching “gemma”")
    longest = box.repos.topLevelItem(2)
    assert longest.toolTip(0).startswith("yuxinlu1/gemma-4-12B-agentic-fable5-composer2.5-v2-3.5x-tau2-GGUF")
    box.repos.resize(420, 300)  # narrower than the longest name: the name gives way, the numbers stay
    qtbot.wait(10)
    widths = [box.repos.columnWidth(c) for c in range(box.repos.columnCount())]
    assert sum(widths) <= box.repos.viewport().width(), widths
    assert widths[1] >= box.repos.fontMetrics().horizontalAdvance("4,567,553")


def test_long_names_elide_on_purpose_with_their_whole_text_in_the_tooltip(qtbot) -> None:
    """The pane is narrower than a long repository name or a file with its projector: those
    columns lose their middle (declared to the clip probe), and the tooltip says all of it."""
    from types import SimpleNamespace

    from app.library.download.unit import FileSpec
    from app.library.huggingface.hub import DownloadUnit
    from app.library.huggingface.hub_search import RepoChoice
    from app.service.library.hub_search import ChoiceRow, RepoListing
    from app.ui.common.text_room import ELIDED_COLUMNS

    box = HubSearchBox(SimpleNamespace(spawn=None), SimpleNamespace())  # type: ignore[arg-type]
    qtbot.addWidget(box)
    assert box.repos.property(ELIDED_COLUMNS) == [0] and box.files.property(ELIDED_COLUMNS) == [4]
    base = "http://127.0.0.1/ggml-org/gemma-3-4b-it-GGUF/resolve/main/"
    files = (FileSpec(base + "gemma-3-4b-it-Q4_K_M.gguf", "gemma-3-4b-it-Q4_K_M.gguf", None, 2_489_757_856),
             FileSpec(base + "mmproj-model-f16.gguf", "mmproj-model-f16.gguf", None, 851_251_104))
    unit = DownloadUnit("gemma-3-4b-it-Q4_K_M.gguf", "gemma-3-4b-it-Q4_K_M", "gguf", files,
                        base + "gemma-3-4b-it-Q4_K_M.gguf", projector="mmproj-model-f16.gguf")
    box._listing = "ggml-org/gemma-3-4b-it-GGUF"
    box._show_files(RepoListing("ggml-org/gemma-3-4b-it-GGUF", (
        ChoiceRow(RepoChoice(unit, "Q4_K_M"), None, "Whether it fits is not known yet."),)))
    item = box.files.topLevelItem(0)
    whole = "gemma-3-4b-it-Q4_K_M.gguf + mmproj-model-f16.gguf, which lets it read images (its vision projector)"
    assert item.text(4) == whole
    assert item.toolTip(4) == f"{whole}\nfrom {base}gemma-3-4b-it-Q4_K_M.gguf"


def test_a_14b_file_is_said_to_be_slow_here_and_one_of_unknown_size_has_no_speed(
        make_window, loop, server: TestServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 37: a 9 GB 14B file fits this machine's memory but decodes at a few tokens/s on its CPU:
    the Fit column says Slow with the number; a file whose size the server does not state gets none."""
    server.files["/api/models/Qwen/Qwen3-14B-GGUF?blobs=true"] = Served(body=json.dumps(
        {"id": "Qwen/Qwen3-14B-GGUF", "sha": "a" * 40, "siblings": [
            {"rfilename": "Qwen3-14B-Q4_K_M.gguf", "size": 9_000_000_000}, {"rfilename": "Qwen3-14B-Q8_0.gguf"}]}
    ).encode())
    monkeypatch.setenv("HF_ENDPOINT", server.base)
    window = make_window()
    _manager, box = open_search(window)

    box.open_repo("Qwen/Qwen3-14B-GGUF")
    run(loop, until(lambda: box.files.topLevelItemCount() == 2, what="the files"))

    slow, unknown = rows(box.files)
    assert slow[0] == "Q4_K_M" and slow[2].startswith("Slow · about ") and "tokens/s here" in slow[2], slow
    tip = box.files.topLevelItem(0).toolTip(2)
    assert tip.startswith("Slow: about ") and "(14B)" in tip and "\nHow it was judged: " in tip
    assert unknown[0] == "Q8_0" and unknown[2] == "Speed not known"
    assert box.files.topLevelItem(1).toolTip(2).startswith("Speed not known: the server did not state")
