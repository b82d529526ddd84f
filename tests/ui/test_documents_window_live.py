"""The Documents window over the real DocumentsService: a folder added, read in the reader process, its files listed."""

from __future__ import annotations

from app.core.paths import data_paths
from app.library.importer import import_model_file
from app.library.models import ModelLibrary
from app.service import events as ev
from app.ui.documents.documents_window import DocumentsWindow
from tests.helpers.embedding_gguf import build_embedding_gguf
from tests.helpers.scripted_engine import ScriptedEngine
from tests.ui.conftest import run, service_of


def test_a_folder_added_in_the_window_is_indexed_with_its_unreadable_file_explained(make_window, qtbot, loop,
                                                                                  tmp_path) -> None:
    window = make_window(engine=ScriptedEngine())
    folder = tmp_path / "Field notes"
    folder.mkdir()
    (folder / "birds.md").write_text("# Kestrels\n\nA kestrel hovers over the field before it dives.\n",
                                     encoding="utf-8")
    (folder / "weather.txt").write_text("Rain in the morning, wind from the west after noon.\n", encoding="utf-8")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7 this is not a PDF at all")
    progress: list[ev.IndexingProgress] = []
    window.adapter.indexingProgress.connect(progress.append)
    window.show_documents_window()
    shown = window.documents_window
    assert isinstance(shown, DocumentsWindow) and shown.stack.currentWidget() is shown.empty
    shown.choose_folder = lambda: folder  # type: ignore[method-assign]
    shown.ask_name = lambda default: default  # type: ignore[method-assign]
    shown.add_first.click()
    qtbot.waitUntil(lambda: shown.collections.rowCount() == 1 and shown.collections.item(0, 4).text() == "Up to date",
                    timeout=60_000)
    assert [shown.collections.item(0, column).text() for column in (0, 2, 3)] == [
        "Field notes", "3 (1 unreadable)", "Just now"]
    assert progress and progress[-1].collection == "Field notes"
    # The list follows the collection at most once a second: the last reading comes in a moment.
    qtbot.waitUntil(lambda: shown.files.summary.text() == "3 files · 1 unreadable", timeout=10_000)
    assert shown.files.shown_paths()[0] == "broken.pdf"  # the problem first
    assert shown.files.model.text(0, 1) == "Unreadable"
    assert "PDF" in shown.files.model.text(0, 3)
    assert not shown.progress_row.isVisibleTo(shown)
    shown.files.only_problems.click()
    assert shown.files.shown_paths() == ["broken.pdf"]


def test_an_installed_embedding_model_is_picked_in_the_window(make_window, qtbot, loop, tmp_path) -> None:
    window = make_window(engine=ScriptedEngine())
    window.show_documents_window()
    shown = window.documents_window
    assert isinstance(shown, DocumentsWindow)
    service = service_of(window).collections
    assert service.embedding_model() is None
    library = ModelLibrary(data_paths().models)
    oldest = import_model_file(library, build_embedding_gguf(tmp_path / "first.gguf", name="first"))
    installed = import_model_file(library, build_embedding_gguf(tmp_path / "mini.gguf", seed=1))
    run(loop, service_of(window).library.refresh())
    line = shown.embedding
    qtbot.waitUntil(lambda: line.picker.isVisibleTo(shown))
    # None chosen: the service takes the oldest installed as soon as the library lists it (the CLI's rule).
    qtbot.waitUntil(lambda: service.embedding_model() == oldest.id, timeout=30_000)
    assert window.doors.settings.settings.embedding_model is None
    line.picker.setCurrentIndex(line.picker.findData(installed.id))
    qtbot.waitUntil(lambda: service.embedding_model() == installed.id, timeout=30_000)
    qtbot.waitUntil(lambda: line.words.text().startswith("Search by meaning: on, with "))
    assert window.doors.settings.settings.embedding_model == installed.id  # kept where the CLI reads it
