"""Pasting a Hugging Face repository or a link in the model manager: look it up, pick a file,
download it; through a real window, against real HTTP servers on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from PySide6.QtCore import Qt

from app.core.units import human_size
from app.ui.state.download_items import DownloadsModel
from app.ui.main_window import MainWindow
from app.ui.models.model_manager import ModelManager
from tests.helpers.http_servers import TestServer, hugging_face_repo, running_server, sha256_of
from tests.ui.conftest import run, until

REPO = "someone/Thinker-GGUF"


@pytest.fixture
def servers() -> Iterator[tuple[TestServer, TestServer]]:
    """Hugging Face's front (listings, resolve redirects) and its storage host."""
    with running_server() as front, running_server() as storage:
        yield front, storage


def open_get_a_model(window: MainWindow) -> ModelManager:
    window.show_model_manager()
    manager = window.model_manager
    assert manager is not None
    manager.tabs.setCurrentWidget(manager.catalog)
    return manager


def found_rows(manager: ModelManager) -> list[list[str]]:
    found = manager.catalog.link.found
    return [[found.topLevelItem(row).text(column) for column in range(3)] for row in range(found.topLevelItemCount())]


def looked_up(loop, manager: ModelManager) -> None:
    link = manager.catalog.link
    run(loop, until(lambda: not link.note.text().startswith("Looking up"), what="the lookup"))


def test_a_pasted_repository_lists_its_files_and_the_picked_one_downloads_and_is_listed(
        make_window, loop, qtbot, servers, thinking_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    front, storage = servers
    wanted = thinking_model.read_bytes()
    other = b"GGUF" + bytes(60)  # never fetched: only the picked file is
    endpoint = hugging_face_repo(front, storage, REPO, {"thinker-Q8_0.gguf": wanted, "thinker-Q2_K.gguf": other})
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    window = make_window()
    manager = open_get_a_model(window)
    link = manager.catalog.link
    assert not link.look_up_button.isEnabled() and not link.download_button.isEnabled() and link.found.isHidden()
    qtbot.keyClicks(link.link, REPO)
    assert link.look_up_button.isEnabled() and front.log == [], "nothing is sent while typing"
    qtbot.keyClick(link.link, Qt.Key.Key_Return)
    assert link.note.text() == f"Looking up {REPO}…" and not link.look_up_button.isEnabled()
    looked_up(loop, manager)
    assert [entry.path for entry in front.log] == [f"/api/models/{REPO}?blobs=true"]
    assert found_rows(manager) == [["thinker-Q2_K", "GGUF", human_size(len(other))],
                                   ["thinker-Q8_0", "GGUF", human_size(len(wanted))]]
    assert link.note.text() == f"{REPO} offers 2 models. Pick one, then press Download."
    assert link.look_up_button.isEnabled() and not link.download_button.isEnabled(), "nothing picked yet"
    link.found.setCurrentItem(link.found.topLevelItem(1))
    link.download_button.click()
    assert manager.tabs.currentWidget() is manager.downloads
    downloads = window.adapter.downloads
    run(loop, until(lambda: [item.state for item in downloads.rows()] == ["done"], what="the download"))
    [item] = downloads.rows()
    assert downloads.index(0, DownloadsModel.STATE).data() == "Done" and item.title == "thinker-Q8_0"
    assert not storage.requests(path=f"/blobs/{sha256_of(b'thinker-Q2_K.gguf')}")
    installed = window.adapter.installed
    run(loop, until(lambda: any(row.model.id == item.model_id for row in installed.rows()), what="the listing"))
    row = next(row for row in installed.rows() if row.model.id == item.model_id)
    assert row.model.path.read_bytes() == wanted and row.problem is None
    assert manager.installed.view.model().rowCount() == 2  # the tiny model and the one just downloaded


def test_what_cannot_be_found_is_said_and_an_address_is_taken_as_given(
        make_window, loop, qtbot, servers, monkeypatch: pytest.MonkeyPatch) -> None:
    front, storage = servers
    endpoint = hugging_face_repo(front, storage, "someone/notes", {"README.md": b"# Notes\n"})
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    window = make_window()
    manager = open_get_a_model(window)
    link = manager.catalog.link

    link.link.setText(f"{endpoint}/someone/missing")
    link.look_up_button.click()
    looked_up(loop, manager)
    assert "has no public model repository named someone/missing" in link.note.text()
    assert link.found.isHidden() and not link.download_button.isEnabled()

    link.link.setText("someone/notes")
    link.look_up_button.click()
    looked_up(loop, manager)
    assert link.note.text().startswith("someone/notes holds no GGUF file and no ONNX Runtime GenAI folder")

    address = storage.url("/files/kestrel-test.gguf")  # not on the Hub's host: a plain address
    link.link.setText(address)
    link.look_up_button.click()
    looked_up(loop, manager)
    assert storage.log == [], "an address is taken as given: the download is its first request"
    assert found_rows(manager) == [["kestrel-test", "GGUF", "size from the server"]]
    assert link.note.text() == "Found kestrel-test. Press Download to get it." and link.download_button.isEnabled()
    link.download_button.click()
    downloads = window.adapter.downloads
    run(loop, until(lambda: [item.state for item in downloads.rows()] == ["failed"], what="the download to fail"))
    message = downloads.rows()[0].message
    assert f"There is no file at {address}" in message and "404" in message
    assert downloads.index(0, DownloadsModel.MESSAGE).data() == message
