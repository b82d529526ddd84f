"""The model manager: installed models as cards with details and settings, the catalog, downloads; and through a
real window. The cards themselves (actions, badges, tags, clipping): tests/ui/test_model_cards.py."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from PySide6.QtCore import QObject, QPoint, Qt, Signal
from PySide6.QtTest import QTest

from app.core.settings import Settings
from app.library.model_defaults import ModelDefaults
from app.service.events import DownloadItem
from app.ui.state.download_items import DownloadsModel
from app.ui.state.model_items import CatalogModel, InstalledModelsModel
from app.ui.models.model_manager import ModelManager
from tests.ui.conftest import run, service_of, until
from tests.ui.test_model_items import catalog_row, installed


class FakeLibrary:
    """Stands in for the LibraryDoor: each call returns what was asked, for spawn to record;
    recommended() gives `pick` (a CatalogRow with its reason, or None); `downloads` is the queue."""

    pick = None

    def __init__(self) -> None:
        self.downloads = FakeDownloads()

    def recommended(self):
        return self.pick

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: (name, *args, *kwargs.values())


class FakeDownloads:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __getattr__(self, name: str):
        return lambda download_id: self.calls.append((name, download_id))


class FakeAdapter(QObject):
    """What the manager uses of ServiceAdapter: the three item models, problem and spawn; with the
    library and settings doors it is given beside (`library`, `settings`)."""

    problem = Signal(str)
    speechListed = Signal(tuple)  # Models → Speech's rows

    def __init__(self) -> None:
        super().__init__()
        self.installed = InstalledModelsModel(self)
        self.catalog = CatalogModel(self)
        self.downloads = DownloadsModel(self)
        self.spawned: list[tuple] = []
        self.downloaded: list = []
        self.library = FakeLibrary()
        self.library.download = self.downloaded.append  # type: ignore[attr-defined]
        self.library.download_unit = self.downloaded.append  # type: ignore[attr-defined]
        self.settings = SimpleNamespace(settings=Settings())

    def spawn(self, work) -> None:
        self.spawned.append(work)


def manager(qtbot) -> tuple[ModelManager, FakeAdapter]:
    adapter = FakeAdapter()
    window = ModelManager(adapter, adapter.library, adapter.settings)
    qtbot.addWidget(window)
    window.show()
    assert adapter.spawned == [("refresh",), ("speech_refresh",)]  # opening it asks for fresh listings
    adapter.spawned.clear()
    return window, adapter


def select(view, row: int) -> None:
    """Click the card at this position, as a user chooses a model."""
    QTest.mouseClick(view.cards()[row], Qt.MouseButton.LeftButton, pos=QPoint(4, 4))  # on the card, not a label


def card(view, key: str):
    return view.card(key)


def test_installed_details_buttons_and_total(qtbot) -> None:
    window, adapter = manager(qtbot)
    page = window.installed
    kept = installed("kept", is_default=True, is_loaded=True,
                     model=dataclasses.replace(installed("kept").model, referenced=True))
    gone = installed("gone", fit=None, details={}, problem="/m/gone.gguf is not there now.",
                     model=dataclasses.replace(installed("gone").model, referenced=True, missing=True))
    adapter.installed.set_listing([installed("mine"), kept, gone], 1_500_000_000)
    assert page.total.text() == ("Kestrel's models folder: 1.5 GB · models kept where you keep them: 1.5 GB")
    assert page.view.keys() == ["mine", "kept", "gone"]
    # Issue 37: the tab opens with a model selected (the loaded one), never on empty details.
    assert page.view.current_key == "kept" and page.remove_button.isEnabled()
    select(page.view, 0)
    assert "Q4_K_M" in page.details.toPlainText() and "Runs well on the GPU" in page.details.toPlainText()
    assert "Longest context that fits: 32,768 tokens" in page.details.toPlainText()
    mine = card(page.view, "mine")
    assert mine.action.text() == "Load" and mine.action.isEnabled() and page.default_button.isEnabled()
    mine.action.click()
    page.default_button.click()
    assert adapter.spawned == [("load", "mine"), ("set_default", "mine")]
    select(page.view, 1)
    loaded = card(page.view, "kept")
    assert loaded.action.text() == "Loaded" and not loaded.action.isEnabled() and not page.default_button.isEnabled()
    assert page.remove_button.text() == "Fo&rget…"
    select(page.view, 2)
    missing = card(page.view, "gone")
    assert not missing.action.isEnabled() and "not there now" in page.details.toPlainText()
    assert missing.status.text() == "Missing — reconnect the drive"


def test_remove_asks_first_and_says_what_happens_to_the_file(qtbot, monkeypatch) -> None:
    window, adapter = manager(qtbot)
    page = window.installed
    kept = installed("kept", model=dataclasses.replace(installed("kept").model, referenced=True))
    adapter.installed.set_listing([installed("mine"), kept], 0)
    asked: list[str] = []
    answers = iter([False, True, True])
    monkeypatch.setattr(page, "confirm", lambda question: asked.append(question) or next(answers))
    select(page.view, 0)
    page.remove_button.click()
    assert adapter.spawned == []  # said no
    page.remove_button.click()
    select(page.view, 1)
    page.remove_button.click()
    assert adapter.spawned == [("remove", "mine"), ("remove", "kept")]
    assert "is deleted from Kestrel's models folder" in asked[0]
    assert asked[2].startswith("Forget “Kept”?") and "the file stays where it is" in asked[2]


def test_add_a_file_asks_copy_or_reference(qtbot, monkeypatch) -> None:
    from PySide6.QtWidgets import QFileDialog

    window, adapter = manager(qtbot)
    page = window.installed
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: ("/models/a.gguf", ""))
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *a, **k: "/models")
    choices = iter([True, None, False])
    monkeypatch.setattr(page, "ask_reference", lambda path: next(choices))
    for _ in range(3):
        page.add_file_button.click()
    page.add_folder_button.click()
    assert adapter.spawned == [("add", "/models/a.gguf", True), ("add", "/models/a.gguf", False),
                               ("add_folder", "/models")]


def test_the_settings_form_saves_the_models_own_values(qtbot) -> None:
    window, adapter = manager(qtbot)
    page = window.installed
    own = installed("mine", model=dataclasses.replace(installed("mine").model,
                                                      defaults=ModelDefaults(gpu_layers=-1, top_k=20)))
    adapter.installed.set_listing([own], 0)
    select(page.view, 0)
    form = page.form
    assert form.gpu_layers.text() == "all" and form.top_k.value() == 20
    form.app_box("gpu_layers").setChecked(True)
    assert form.gpu_layers.text() == "Auto" and form.gpu_layers.layers() is None
    form.app_box("gpu_layers").setChecked(False)
    form.gpu_layers.setValue(-1)
    assert form.app_box("temperature").isChecked() and not form.temperature.isEnabled()
    assert form.temperature.value() == Settings().generation.temperature  # the app's, shown greyed
    form.app_box("temperature").setChecked(False)
    form.temperature.setValue(0.3)
    form.app_box("top_k").setChecked(True)
    form.device.setCurrentIndex(form.device.findData("cpu"))
    form.app_box("device_preference").setChecked(False)
    form.save_button.click()
    assert adapter.spawned == [("set_defaults", "mine", ModelDefaults(gpu_layers=-1, temperature=0.3,
                                                                      device_preference="cpu"))]
    # A fresh listing of the same saved settings leaves edits in progress alone.
    form.app_box("seed").setChecked(False)
    adapter.installed.set_listing([dataclasses.replace(own, is_loaded=True)], 0)
    assert not form.app_box("seed").isChecked()
    form.reset_button.click()
    assert form.app_box("seed").isChecked()


def test_a_template_left_empty_is_refused_in_words(qtbot) -> None:
    window, adapter = manager(qtbot)
    adapter.installed.set_listing([installed("mine")], 0)
    select(window.installed.view, 0)
    form = window.installed.form
    form.app_box("chat_template").setChecked(False)
    form.save_button.click()
    assert adapter.spawned == []
    assert form.problem.text().startswith("Not saved: chat_template must not be empty")


def test_catalog_fits_filter_and_download(qtbot) -> None:
    window, adapter = manager(qtbot)
    page = window.catalog
    adapter.catalog.set_rows([catalog_row("small"), catalog_row("huge", "wont_fit"),
                              catalog_row("have", installed_id="have")])
    assert page.fits_only.isChecked() and page.view.model().rowCount() == 2
    assert page.view.keys() == ["small", "have"]
    page.fits_only.setChecked(False)
    # Sorted by the verdict, best first: what will not fit comes last.
    assert page.view.model().rowCount() == 3 and page.view.keys() == ["small", "have", "huge"]
    have = card(page.view, "have")
    assert have.action.text() == "Load"  # already installed: no second download
    select(page.view, 0)
    text = page.about.toPlainText()
    assert "A small chat model." in text and "Runs well" in text and "huggingface.co/Qwen/x" in text
    window.tabs.setCurrentWidget(page)
    card(page.view, "small").action.click()
    assert [e.id for e in adapter.downloaded] == ["small"]
    assert window.tabs.currentWidget() is window.downloads
    have.action.click()
    assert adapter.spawned == [("load", "have")] and [e.id for e in adapter.downloaded] == ["small"]
    page.search.setText("hav")
    assert page.view.keys() == ["have"]


def test_the_catalog_card_of_the_model_recommended_here_says_so_and_why(qtbot) -> None:
    window, adapter = manager(qtbot)
    page = window.catalog
    small = catalog_row("small")
    adapter.library.pick = dataclasses.replace(
        small, reason="Fits your 16 GB of memory with room for a 16k context.")
    adapter.catalog.set_rows([small, catalog_row("other")])
    chosen, other = card(page.view, "small"), card(page.view, "other")
    assert chosen.status.text() == "Recommended for this computer" and chosen.status.isVisibleTo(chosen)
    assert chosen.facts is not None and chosen.facts.reason == "Fits your 16 GB of memory with room for a 16k context."
    assert other.status.text() == "" and other.facts is not None and other.facts.reason != chosen.facts.reason


def test_downloads_pause_resume_cancel_on_each_card(qtbot) -> None:
    window, adapter = manager(qtbot)
    page = window.downloads
    adapter.downloads.put(DownloadItem("d1", "Qwen", "running", done=10, total=100))
    adapter.downloads.put(DownloadItem("d2", "Phi", "queued"))
    first = page.cards.card("d1")
    assert page.cards.keys() == ["d1", "d2"]
    assert all(c.cancel_button.isVisibleTo(c) for c in page.cards.cards())  # every download card has Cancel
    assert first.pause_button.isVisibleTo(first) and not first.resume_button.isVisibleTo(first)
    first.pause_button.click()
    adapter.downloads.put(DownloadItem("d1", "Qwen", "paused", done=10, total=100, message="Paused."))
    assert first.resume_button.isVisibleTo(first) and not first.pause_button.isVisibleTo(first)
    assert first.status.text() == "Paused · 10% · 10 bytes of 100 bytes"  # "Paused" once
    first.resume_button.click()
    first.cancel_button.click()
    page.cards.card("d2").cancel_button.click()
    assert adapter.library.downloads.calls == [("pause", "d1"), ("resume", "d1"), ("cancel", "d1"),
                                               ("cancel", "d2")]
    adapter.downloads.put(DownloadItem("d1", "Qwen", "done", done=100, total=100, model_id="qwen"))
    assert not first.cancel_button.isVisibleTo(first) and not first.bar.isVisibleTo(first)
    assert first.status.text() == "Done · 100% · 100 bytes of 100 bytes"


def test_the_manager_in_the_window(make_window, loop, qtbot, tiny_model) -> None:
    window = make_window()
    qtbot.keyClick(window, Qt.Key.Key_M, Qt.KeyboardModifier.ControlModifier)
    manager = window.model_manager
    assert manager is not None and manager.isVisible()
    page = manager.installed
    run(loop, until(lambda: window.adapter.installed.rowCount() == 1, what="the library listed"))
    row = window.adapter.installed.rows()[0]
    assert row.model.path.name == tiny_model.name and row.is_loaded and row.is_default
    select(page.view, 0)
    assert "GGUF" in page.details.toPlainText().upper() and tiny_model.name in page.details.toPlainText()
    page.form.app_box("top_k").setChecked(False)
    page.form.top_k.setValue(7)
    page.form.save_button.click()
    run(loop, until(lambda: window.adapter.installed.rows()[0].model.defaults.top_k == 7, what="saved"))
    assert service_of(window).session.setup.library.list()[0].defaults.top_k == 7
    manager.close()
    window.model_label.clicked.emit()  # the status bar's model name opens it again
    assert manager.isVisible()


def test_a_models_own_tools_are_shown_kept_and_changed_in_the_form(qtbot) -> None:
    window, adapter = manager(qtbot)
    own = installed("mine", model=dataclasses.replace(installed("mine").model,
                                                      defaults=ModelDefaults(tools=("time",), top_k=20)))
    adapter.installed.set_listing([own], 0)
    select(window.installed.view, 0)
    form = window.installed.form
    assert form.tools.text() == "time" and not form.app_box("tools").isChecked()
    form.save_button.click()  # saving another change never drops the tools set elsewhere (the CLI)
    assert adapter.spawned[-1] == ("set_defaults", "mine", ModelDefaults(tools=("time",), top_k=20))
    form.tools.setText("time, files ,")
    form.save_button.click()
    assert adapter.spawned[-1] == ("set_defaults", "mine", ModelDefaults(tools=("time", "files"), top_k=20))
    form.app_box("tools").setChecked(True)
    form.save_button.click()
    assert adapter.spawned[-1] == ("set_defaults", "mine", ModelDefaults(top_k=20))
