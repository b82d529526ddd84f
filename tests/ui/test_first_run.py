"""The first-run offer: the recommended model, its size and why it fits, one Download button, progress in place."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from app.library.huggingface.hub import direct_unit
from app.library.starter import STARTER_ID
from app.service.events import DownloadItem
from app.ui.models.first_run import FirstRunOffer, offer_wanted
from tests.helpers.http_servers import Served, TestServer
from tests.ui.conftest import run, service_of, until
from tests.ui.test_model_items import catalog_row


def test_the_offer_names_the_model_its_size_and_why(qtbot) -> None:
    offer = FirstRunOffer()
    qtbot.addWidget(offer)
    offer.show()
    row = catalog_row("qwen2.5-1.5b-instruct", name="Qwen2.5 1.5B Instruct")
    offer.show_offer(row)
    assert "Qwen2.5 1.5B Instruct" in offer.name.text() and "1.1 GB" in offer.name.text()
    assert offer.reason.text() == "Runs well on the GPU (NVIDIA GeForce RTX 4070)"
    offer.show_offer(replace(row, reason="Fits your 16 GB of memory with room for a 16k context."))
    assert offer.reason.text() == "Fits your 16 GB of memory with room for a 16k context."
    offer.show_offer(row)
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
    def model_door(source: str | None):
        return SimpleNamespace(model=None if source is None else SimpleNamespace(source=source))

    assert offer_wanted(model_door(None)) and offer_wanted(model_door("starter package"))
    assert not offer_wanted(model_door("imported from /models/qwen.gguf"))


def test_the_empty_chat_offers_a_model_and_downloads_it(make_window, loop, monkeypatch) -> None:
    window = make_window(model=None)
    run(loop, until(lambda: window.adapter.catalog.rowCount() > 0, what="the catalog listed"))
    assert window.stack.currentWidget() is window.empty and window.first_run.isVisible()
    offered = window.doors.library.recommended()
    if offered is None:
        assert "no model that fits" in window.first_run.heading.text()
        return
    assert offered.entry.name in window.first_run.name.text()
    # Chosen by this machine's report and the fit verdict, with the reason shown as given.
    assert offered.reason and window.first_run.reason.text() == offered.reason
    asked: list = []
    monkeypatch.setattr(window.doors.library, "download", asked.append)
    window.first_run.downloadRequested.disconnect()
    window.first_run.downloadRequested.connect(window.doors.library.download)
    window.first_run.download_button.click()
    assert asked == [offered.entry]


def test_a_real_model_hides_the_offer(make_window) -> None:
    window = make_window()
    assert window.doors.model.model is not None and window.doors.model.model.id != STARTER_ID
    assert not window.first_run.isVisible()


def test_cancel_while_under_way_then_cancelled_once_and_the_card_cleared(qtbot) -> None:
    offer = FirstRunOffer()
    qtbot.addWidget(offer)
    offer.show()
    row = catalog_row("qwen2.5-1.5b-instruct", name="Qwen2.5 1.5B Instruct")
    offer.show_offer(row)
    assert offer.cancel_button.isHidden(), "nothing to cancel yet"
    offer.download_button.click()
    offer.show_download(DownloadItem("d1", "Qwen2.5 1.5B Instruct", "running", total=100,
                                     message="Connecting to huggingface.co…", catalog_id="qwen2.5-1.5b-instruct"))
    assert offer.state.text() == "Connecting to huggingface.co…", "what it does before the first byte"
    assert offer.cancel_button.isVisible() and offer.download_button.isHidden()
    offer.show_download(DownloadItem("d1", "Qwen2.5 1.5B Instruct", "running", done=30, total=100,
                                     catalog_id="qwen2.5-1.5b-instruct"))
    with qtbot.waitSignal(offer.cancelRequested) as asked:
        offer.cancel_button.click()
    assert asked.args == ["d1"] and not offer.cancel_button.isEnabled(), "one cancel"
    offer.show_download(DownloadItem("d1", "Qwen2.5 1.5B Instruct", "cancelled",
                                     message="What had arrived was deleted.", catalog_id="qwen2.5-1.5b-instruct"))
    assert offer.state.text() == "Cancelled. What had arrived was deleted."
    assert offer.progress.isHidden() and offer.cancel_button.isHidden(), "no bar left behind"
    assert offer.download_button.isVisible() and offer.download_button.isEnabled()
    assert offer.download_button.text() == "Download (1.1 GB)" and offer.manager_button.isVisible()


def test_a_failed_download_leaves_no_bar_and_offers_to_try_again(qtbot) -> None:
    offer = FirstRunOffer()
    qtbot.addWidget(offer)
    offer.show()
    offer.show_offer(catalog_row("qwen2.5-1.5b-instruct", name="Qwen2.5 1.5B Instruct"))
    offer.download_button.click()
    offer.show_download(DownloadItem("d1", "Qwen2.5 1.5B Instruct", "failed", total=100,
                                     message="Could not reach huggingface.co: no network connection? …",
                                     catalog_id="qwen2.5-1.5b-instruct"))
    assert offer.progress.isHidden() and offer.cancel_button.isHidden()
    assert offer.state.text() == "Failed\nCould not reach huggingface.co: no network connection? …"
    assert offer.download_button.text() == "Try again" and offer.download_button.isEnabled()


def test_the_starters_setup_shows_its_progress_and_a_cancel(qtbot) -> None:
    offer = FirstRunOffer()
    qtbot.addWidget(offer)
    offer.show()
    offer.show_setup("Setting up the starter model", 50, 100)
    assert "Setting up the starter model" in offer.heading.text() and offer.progress.value() == 500
    assert offer.download_button.isHidden() and offer.manager_button.isHidden()
    with qtbot.waitSignal(offer.setupCancelRequested):
        offer.cancel_button.click()
    offer.show_download(DownloadItem("d1", "Qwen2.5 1.5B Instruct", "running", done=5, total=10))
    assert "Setting up" in offer.heading.text(), "a download does not take the setup's place"


def test_the_window_card_cancels_the_offered_download(make_window, loop, monkeypatch, server: TestServer) -> None:
    window = make_window(model=None)
    run(loop, until(lambda: window.adapter.catalog.rowCount() > 0, what="the catalog listed"))
    offered = window.doors.library.recommended()
    queue = window.doors.library.downloads
    if offered is None or queue is None:
        pytest.skip("the catalog has nothing that fits this machine to offer")
    server.files["/slow.gguf"] = Served(body=bytes(2_000_000), slow_chunk=8192, slow_delay_s=0.02)
    unit = replace(direct_unit(server.url("/slow.gguf")), title=offered.entry.name, catalog_id=offered.entry.id)
    queue.start(unit)
    card = window.first_run
    run(loop, until(lambda: card.progress.isVisible() and card.progress.value() > 0, what="bytes arriving"))
    assert card.cancel_button.isVisible()
    card.cancel_button.click()
    run(loop, until(lambda: card.state.text().startswith("Cancelled"), what="the cancel shown"))
    assert card.state.text().count("Cancelled") == 1 and card.progress.isHidden()
    assert card.download_button.isEnabled() and card.cancel_button.isHidden()


def test_a_fresh_window_says_nothing_about_its_model_until_it_knows(make_window, loop) -> None:
    """Before the service has said what the model is, the empty chat is blank: a fresh window used to show
    "No model yet…" at build time and then the message view's "Ask anything…" while the model loaded."""
    window = make_window(model=None, start=False)
    seen: list[str] = []

    def look() -> None:
        pane = window.stack.currentWidget()
        seen.append(window.empty_text.text() if pane is window.empty and window.empty_text.isVisible() else
                    "" if pane is window.empty else "messages")

    look()
    window.adapter.modelStateChanged.connect(look)
    run(loop, service_of(window).start_up())
    look()
    assert seen[0] == "", seen
    assert "messages" not in seen, seen  # no model: never the message view and its "Ask anything…"
    assert seen[-1].startswith("No model yet"), seen  # said once it is known
