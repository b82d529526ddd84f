"""The first-run offer: the recommended model, its size and why it fits, one Download button, progress in place."""

from __future__ import annotations

from types import SimpleNamespace

from app.library.starter import STARTER_ID
from app.service.events import DownloadItem
from app.service.model_setup import ModelSetup
from app.ui.first_run import FirstRunOffer, offer_wanted
from tests.ui.conftest import run, until
from tests.ui.test_model_items import catalog_row


def test_the_offer_names_the_model_its_size_and_why(qtbot) -> None:
    offer = FirstRunOffer()
    qtbot.addWidget(offer)
    offer.show()
    row = catalog_row("qwen2.5-1.5b-instruct", name="Qwen2.5 1.5B Instruct")
    offer.show_offer(row)
    assert "Qwen2.5 1.5B Instruct" in offer.name.text() and "1.1 GB" in offer.name.text()
    assert offer.reason.text() == "Runs well on the GPU (NVIDIA GeForce RTX 4070)"
    assert offer.download_button.text() == "Download (1.1 GB)" and offer.progress.isHidden()
    with qtbot.waitSignal(offer.downloadRequested) as asked:
        offer.download_button.click()
    assert asked.args == [row.entry] and not offer.download_button.isEnabled()
    offer.show_download(DownloadItem("other", "Something else", "running", done=5, total=10))
    assert offer.progress.maximum() == 0  # not its download: still waiting for its own
    offer.show_download(DownloadItem("d1", "Qwen2.5 1.5B Instruct", "running", done=50, total=100,
                                     catalog_id="qwen2.5-1.5b-instruct"))
    assert offer.progress.value() == 500 and "50%" in offer.state.text()
    offer.show_offer(row)  # a fresh listing while it downloads keeps the progress
    assert offer.progress.isVisible()
    offer.show_download(DownloadItem("d1", "Qwen2.5 1.5B Instruct", "failed", done=50, total=100,
                                     message="The connection dropped; it will resume from 50 bytes."))
    assert offer.download_button.isEnabled() and offer.download_button.text() == "Try again"
    assert "connection dropped" in offer.state.text()
    offer.show_download(DownloadItem("d1", "Qwen2.5 1.5B Instruct", "done", done=100, total=100))
    assert "now the default model" in offer.state.text() and offer.progress.value() == 1000


def test_nothing_that_fits_is_said_in_one_line(qtbot) -> None:
    offer = FirstRunOffer()
    qtbot.addWidget(offer)
    offer.show()
    offer.show_offer(None)
    assert "no model that fits this machine" in offer.heading.text()
    assert offer.download_button.isHidden() and offer.manager_button.isVisible()
    with qtbot.waitSignal(offer.managerRequested):
        offer.manager_button.click()


def test_offered_with_no_model_or_only_the_starter() -> None:
    def controller(source: str | None):
        return SimpleNamespace(model=None if source is None else SimpleNamespace(source=source))

    assert offer_wanted(controller(None)) and offer_wanted(controller("starter package"))
    assert not offer_wanted(controller("imported from /models/qwen.gguf"))


def test_the_empty_chat_offers_a_model_and_downloads_it(make_window, loop, monkeypatch) -> None:
    monkeypatch.setattr(ModelSetup, "starter_available", lambda self: False)
    window = make_window(model=None)
    run(loop, until(lambda: window.adapter.catalog.rowCount() > 0, what="the catalog listed"))
    assert window.stack.currentWidget() is window.empty and window.first_run.isVisible()
    offered = window.controller.library.recommended()
    if offered is None:
        assert "no model that fits" in window.first_run.heading.text()
        return
    assert offered.entry.name in window.first_run.name.text()
    asked: list = []
    monkeypatch.setattr(window.controller.library, "download", asked.append)
    window.first_run.downloadRequested.disconnect()
    window.first_run.downloadRequested.connect(window.controller.library.download)
    window.first_run.download_button.click()
    assert asked == [offered.entry]


def test_a_real_model_hides_the_offer(make_window) -> None:
    window = make_window()
    assert window.controller.model is not None and window.controller.model.id != STARTER_ID
    assert not window.first_run.isVisible()
