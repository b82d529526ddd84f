"""The Documents window over a stand-in DocumentsService: collections, progress, pause, files, the embedding line."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QPushButton

from app.core.paths import data_paths
from app.library.importer import import_model_file
from app.library.models import ModelLibrary
from app.service import events as ev
from app.service.doors.documents import DocumentsDoor
from app.library.catalog import CatalogEntry, load_catalog
from app.library.model_files.model_purpose import ModelPurpose
from app.ui.documents.documents_embedding import CHOOSE, EmbeddingLine, offer_words
from app.ui.documents.documents_window import DocumentsWindow
from app.ui.documents.documents_words import EMPTY, NO_MODEL, NONE_CHOSEN, ago, progress_words, time_left
from tests.helpers.embedding_gguf import build_embedding_gguf
from tests.helpers.scripted_engine import ScriptedEngine
from tests.ui.conftest import run, service_of
from tests.helpers.documents_fake import FakeDocuments, collection


@pytest.fixture
def window(make_window, loop):
    """A window whose documents service is the stand-in; the real one is closed first, so no
    late CollectionsChanged of its own (its start's, under load) overwrites the stand-in's."""
    made = make_window(engine=ScriptedEngine())
    service = service_of(made)
    run(loop, service.collections.close())
    run(loop, asyncio.sleep(0.05))  # what it posted to the loop before it closed is delivered now
    service.collections = FakeDocuments(service.bus.emit)
    made.doors.documents = DocumentsDoor(service)  # the Documents window's door, over the stand-in
    return made


def documents(window) -> tuple[DocumentsWindow, FakeDocuments]:
    window.findChild(QAction, "showDocuments").trigger()
    assert window.documents_window is not None and window.documents_window.isVisible()
    return window.documents_window, service_of(window).collections


def cells(shown: DocumentsWindow, row: int) -> list[str]:
    return [shown.collections.item(row, column).text() for column in range(shown.collections.columnCount())]


def test_the_empty_window_offers_one_action_and_adding_a_folder_lists_it(window, qtbot, tmp_path) -> None:
    shown, fake = documents(window)
    assert shown.stack.currentWidget() is shown.empty
    assert EMPTY in [label.text() for label in shown.empty.findChildren(type(shown.progress_words))]
    folder = tmp_path / "Reports"
    folder.mkdir()
    shown.choose_folder = lambda: folder  # type: ignore[method-assign]
    asked: list[str] = []
    shown.ask_name = lambda default: asked.append(default) or default  # type: ignore[method-assign]
    shown.add_first.click()
    qtbot.waitUntil(lambda: shown.collections.rowCount() == 1)
    assert asked == ["Reports"]  # the name defaults to the folder's
    assert ("add_folder", (folder, "Reports")) in fake.calls
    assert shown.stack.currentWidget() is shown.page
    assert cells(shown, 0) == ["Reports", str(folder), "0", "Never", "Looking for changes"]
    assert shown.selected() == "Reports" and shown.reindex.isEnabled() and shown.remove.isEnabled()


def test_a_refused_folder_is_said_in_plain_words(window, qtbot, tmp_path) -> None:
    shown, fake = documents(window)
    fake.put(collection("notes", tmp_path))
    shown.choose_folder = lambda: tmp_path  # type: ignore[method-assign]
    shown.ask_name = lambda default: "notes"  # type: ignore[method-assign]
    shown.add_folder.click()
    qtbot.waitUntil(lambda: shown.problem.isVisible())
    assert "already exists" in shown.problem.text.text()
    loads = fake.calls.count(("files", "notes"))
    shown.load_files()  # the file list coming in is no answer to the refusal
    qtbot.waitUntil(lambda: fake.calls.count(("files", "notes")) > loads)
    qtbot.wait(50)
    assert shown.problem.isVisible()
    shown.reindex.click()  # a command that goes through: the refusal has been answered
    qtbot.waitUntil(lambda: not shown.problem.isVisible())
    service_of(window).bus.emit(ev.DocumentsProblem("notes", "Its folder is gone: plug in the drive or remove it."))
    assert shown.problem.text.text() == "notes: Its folder is gone: plug in the drive or remove it."
    fake.put(collection("notes", tmp_path, state=ev.IndexState.FAILED))
    assert shown.problem.isVisible() and shown.collections.item(0, 4).text() == "Stopped by a problem"
    fake.put(collection("notes", tmp_path, state=ev.IndexState.READING))  # the drive is back
    assert not shown.problem.isVisible()


def test_rows_say_when_each_was_indexed_and_the_files_list_puts_problems_first(window, qtbot, tmp_path) -> None:
    fake = service_of(window).collections
    fake.infos = [collection("notes", tmp_path / "notes", files=3, unreadable=1, last_indexed=time.time() - 130),
                  collection("papers", tmp_path / "papers", last_indexed=None, state=ev.IndexState.READING)]
    fake.file_lists["notes"] = (
        ev.FileInfo(tmp_path / "notes" / "b.md", "indexed", "", 4),
        ev.FileInfo(tmp_path / "notes" / "a.pdf", "indexed", "", 9),
        ev.FileInfo(tmp_path / "notes" / "scan.pdf", "unreadable", "It holds only images of pages: no text.", 0))
    shown, _ = documents(window)
    assert cells(shown, 0) == ["notes", str(tmp_path / "notes"), "3 (1 unreadable)", "2 minutes ago", "Up to date"]
    assert cells(shown, 1)[3:] == ["Never", "Reading files"]
    qtbot.waitUntil(lambda: shown.files.model.rowCount() == 3)
    assert shown.files.shown_paths() == ["scan.pdf", "a.pdf", "b.md"]
    assert shown.files.model.text(0, 3) == "It holds only images of pages: no text."
    assert shown.files.summary.text() == "3 files · 1 unreadable"
    shown.files.only_problems.click()
    assert shown.files.shown_paths() == ["scan.pdf"]
    shown.collections.selectRow(1)
    qtbot.waitUntil(lambda: ("files", "papers") in fake.calls)
    qtbot.waitUntil(lambda: shown.files.model.rowCount() == 0)
    assert shown.files.heading.text() == "Files in “papers”"


def test_progress_says_how_far_and_why_it_waits_and_pause_holds_it(window, qtbot, tmp_path) -> None:
    shown, fake = documents(window)
    assert not shown.progress_row.isVisibleTo(shown)
    fake.put(collection("notes", tmp_path, state=ev.IndexState.READING, files=860))
    emit = service_of(window).bus.emit
    emit(ev.IndexingProgress("notes", ev.IndexState.READING, 120, 860, 130.0, ""))
    assert shown.progress_row.isVisibleTo(shown)
    assert shown.progress_words.text() == "notes: 120 of 860 files · about 2 min left"
    assert (shown.progress.value(), shown.progress.maximum()) == (120, 860)
    emit(ev.IndexingProgress("notes", ev.IndexState.WAITING, 120, 860, 130.0, "Waiting while an answer is written"))
    assert shown.progress_words.text() == "notes: Waiting while an answer is written · 120 of 860 files"
    assert shown.pause.text() == "&Pause"
    shown.pause.click()
    assert fake.calls[-1] == ("pause", None)
    assert shown.pause.text() == "Res&ume"
    shown.pause.click()
    assert fake.calls[-1] == ("resume", None)
    fake.put(collection("notes", tmp_path, files=860, last_indexed=time.time()))
    assert not shown.progress_row.isVisibleTo(shown)  # done: the bar goes
    fake.pause()  # held with nothing to read: the row stays, to resume from
    service_of(window).bus.emit(ev.CollectionsChanged(tuple(fake.infos)))
    assert shown.progress_row.isVisibleTo(shown) and shown.pause.text() == "Res&ume"
    assert shown.progress_words.text() == "Paused: changed files are read once you resume"


def test_remove_asks_first_and_the_last_one_gone_brings_back_the_empty_state(window, qtbot, tmp_path) -> None:
    shown, fake = documents(window)
    fake.put(collection("notes", tmp_path))
    questions: list[str] = []
    shown.confirm = lambda question: questions.append(question) or False  # type: ignore[method-assign]
    shown.remove.click()
    assert "notes" in questions[0] and "stay" in questions[0]
    assert not any(call[0] == "remove" for call in fake.calls)
    shown.reindex.click()
    qtbot.waitUntil(lambda: ("reindex", "notes") in fake.calls)
    shown.confirm = lambda question: True  # type: ignore[method-assign]
    shown.collections.setFocus()
    qtbot.keyClick(shown.collections, Qt.Key.Key_Delete)
    qtbot.waitUntil(lambda: shown.stack.currentWidget() is shown.empty)
    assert ("remove", "notes") in fake.calls


def test_the_embedding_line_offers_a_model_and_then_a_choice_among_installed_ones(window, qtbot, loop,
                                                                                  tmp_path) -> None:
    installed_before = import_model_file(ModelLibrary(data_paths().models),
                                         build_embedding_gguf(tmp_path / "before.gguf"))
    shown, fake = documents(window)
    line = shown.embedding  # opening the window lists the models: one installed before is offered
    qtbot.waitUntil(lambda: line.picker.findData(installed_before.id) >= 0)
    installed = import_model_file(ModelLibrary(data_paths().models), build_embedding_gguf(tmp_path / "mini.gguf"))
    run(loop, service_of(window).library.refresh())
    qtbot.waitUntil(lambda: line.picker.isVisibleTo(shown))
    assert line.words.text() == NONE_CHOSEN and not line.get_model.isVisibleTo(shown)
    assert line.picker.currentText() == CHOOSE
    line.picker.setCurrentIndex(line.picker.findData(installed.id))
    qtbot.waitUntil(lambda: fake.chosen == installed.id)
    qtbot.waitUntil(lambda: line.words.text().startswith("Search by meaning: on, with "))


def test_the_catalogs_embedding_model_is_downloaded_from_the_line_and_then_used(window, qtbot, loop,
                                                                                tmp_path) -> None:
    shown, fake = documents(window)
    line = shown.embedding  # opening the window lists the catalog, with its embedding entry
    entry = next(e for e in load_catalog() if e.purpose is ModelPurpose.EMBEDDING)
    qtbot.waitUntil(lambda: line.words.text() == offer_words(entry))
    assert f"({entry.name}, 25.0 MB)" in line.words.text() and line.get_model.text() == "&Download it"
    asked: list[CatalogEntry] = []
    window.doors.documents.download = asked.append  # no network here: the queue is the library's
    line.get_model.click()
    assert asked == [entry]
    emit = service_of(window).bus.emit
    item = ev.DownloadItem(id="d1", title=entry.name, state=ev.DownloadState.RUNNING, done=10, total=40,
                           catalog_id=entry.id)
    emit(ev.DownloadChanged(item))
    assert line.words.text() == f"Search by meaning: downloading {entry.name}… 25%"
    assert not line.get_model.isEnabled()
    installed = import_model_file(ModelLibrary(data_paths().models), build_embedding_gguf(tmp_path / "mini.gguf"))
    emit(ev.DownloadChanged(dataclasses.replace(item, state=ev.DownloadState.DONE, done=40, model_id=installed.id)))
    run(loop, service_of(window).library.refresh())
    qtbot.waitUntil(lambda: fake.chosen == installed.id)  # downloaded from here: used once it is in
    qtbot.waitUntil(lambda: line.words.text().startswith("Search by meaning: on, with "))


def test_without_a_catalog_entry_the_line_opens_the_models_window(qtbot) -> None:
    line = EmbeddingLine()
    qtbot.addWidget(line)
    line.show_choice(None, ())
    assert line.words.text() == NO_MODEL and line.get_model.text() == "&Get an embedding model…"
    with qtbot.waitSignal(line.modelsRequested):
        line.get_model.click()


def test_the_menu_opens_one_documents_window_and_looks_for_changed_files(window) -> None:
    first, fake = documents(window)
    second, _ = documents(window)
    assert first is second
    assert fake.calls.count(("rescan", None)) == 2
    action = window.findChild(QAction, "showDocuments")
    assert action.shortcut().toString() == "Ctrl+Shift+D"


def test_the_words_for_time() -> None:
    now = 1_000_000.0
    assert [ago(now - s, now) for s in (5, 61, 130, 3600, 7300, 90_000, 3 * 86_400)] == [
        "Just now", "1 minute ago", "2 minutes ago", "1 hour ago", "2 hours ago", "Yesterday", "3 days ago"]
    assert [time_left(s) for s in (None, 30, 130, 3600, 5400)] == [
        "", "less than a minute left", "about 2 min left", "about 1 h left", "about 1 h 30 min left"]
    embedding = ev.IndexingProgress("notes", ev.IndexState.EMBEDDING, 40, 200, None, "")
    assert progress_words(embedding) == "notes: 40 of 200 passages prepared for search by meaning"
    paused = ev.IndexingProgress("notes", ev.IndexState.PAUSED, 4, 9, 20.0, "")
    assert progress_words(paused) == "notes: Paused · 4 of 9 files"


def test_tab_reaches_every_control(window, qtbot, tmp_path) -> None:
    fake = service_of(window).collections
    fake.infos = [collection("notes", tmp_path, state=ev.IndexState.READING)]
    shown, _ = documents(window)
    shown.activateWindow()
    shown.collections.setFocus()
    qtbot.waitUntil(lambda: shown.focusWidget() is shown.collections)
    reached = []
    for _ in range(12):
        shown.focusNextChild()
        reached.append(shown.focusWidget())
    wanted = [shown.add_folder, shown.reindex, shown.remove, shown.collections, shown.pause, shown.files.only_problems,
              shown.files.table, shown.embedding.get_model]
    assert all(widget in reached for widget in wanted), [type(widget).__name__ for widget in reached]
    assert shown.findChild(QPushButton, "documentsClose") in reached


def test_the_file_list_keeps_its_place_while_the_collection_is_read(qtbot, tmp_path) -> None:
    from app.ui.documents.documents_files import FilesPanel, ordered

    panel = FilesPanel()
    qtbot.addWidget(panel)
    panel.resize(600, 300)
    panel.show()
    files = [ev.FileInfo(tmp_path / f"{number:03}.md", "pending", "", 0) for number in range(300)]
    panel.show_files("notes", tmp_path, ordered(files))
    bar = panel.table.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0)
    bar.setValue(bar.maximum() // 2)
    kept = bar.value()
    files[0] = ev.FileInfo(tmp_path / "000.md", "indexed", "", 3)
    panel.show_files("notes", tmp_path, ordered(files))
    assert bar.value() == kept > 0
    panel.show_files("papers", tmp_path, ordered(files))
    assert bar.value() == 0  # another collection starts at its top
