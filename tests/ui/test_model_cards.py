"""Model and download cards: the one action each state offers, the badge's colour, the tags, Cancel, and that
nothing in the manager is cut at its minimum size, at 100% and 200%, in both themes."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QAbstractButton, QApplication, QLabel, QWidget

from app.hardware.fit import Verdict
from app.service.events import DownloadItem
from app.ui.models import downloads_view
from app.ui.state.fit_verdict import VERDICT_COLOURS, VERDICT_WORDS
from app.ui.models.manager_details import details_html
from app.ui.models.model_card import UNKNOWN_COLOUR, ElidedLabel, ModelCard
from app.ui.models.model_card_facts import CardAction, catalog_facts, installed_facts, publisher_of
from app.ui.models.model_manager import ModelManager
from app.ui.common.theme import apply_theme, palette_colors
from tests.ui.test_model_items import catalog_row, fit, installed
from tests.ui.test_model_manager import FakeAdapter, manager

ROOT = Path(__file__).resolve().parents[2]
LONG_NAME = "qwen2.5-coder-1.5b-instruct-with-a-name-longer-than-any-card-is-wide-q4_k_m"


def missing_row():
    return installed("gone", fit=None, details={}, problem="/m/gone.gguf is not there now.",
                     model=dataclasses.replace(installed("gone").model, referenced=True, missing=True))


@pytest.mark.parametrize(("row", "action", "enabled"), [
    (installed("mine"), CardAction.LOAD, True),
    (installed("mine", is_loaded=True), CardAction.LOADED, False),
    (missing_row(), CardAction.LOAD, False),
    (installed("bad", problem="bad.gguf is not a GGUF model file."), CardAction.LOAD, False),
])
def test_an_installed_cards_one_action(qtbot, row, action, enabled) -> None:
    card = ModelCard()
    qtbot.addWidget(card)
    card.show_facts(installed_facts(row))
    assert (card.action.text(), card.action.isEnabled()) == (action.value, enabled)
    if row.problem and not row.model.missing:
        assert card.action.toolTip() == row.problem  # why it cannot load, on the greyed button


@pytest.mark.parametrize(("installed_id", "loaded", "action", "enabled"), [
    (None, False, CardAction.DOWNLOAD, True), ("have", False, CardAction.LOAD, True),
    ("have", True, CardAction.LOADED, False)])
def test_a_catalog_cards_one_action(qtbot, installed_id, loaded, action, enabled) -> None:
    card = ModelCard()
    qtbot.addWidget(card)
    card.show_facts(catalog_facts(catalog_row("small", installed_id=installed_id), loaded))
    assert (card.action.text(), card.action.isEnabled()) == (action.value, enabled)
    assert card.publisher.full_text() == "Qwen" and card.details.text() == "1.1 GB · 1.5B · Q4_K_M · GGUF"


@pytest.mark.parametrize("verdict", [*Verdict, None])
def test_the_badge_is_the_verdicts_colour_and_words_with_its_reason(qtbot, verdict) -> None:
    card = ModelCard()
    qtbot.addWidget(card)
    value = None if verdict is None else verdict.value
    summary = {None: "", "runs_well": "Runs well on the GPU", "usable": "Usable: about 6 tokens/s here",
               "runs_slowly": "Runs slowly: on the CPU",
               "wont_fit": "Will not fit: needs 9 GB, 4 GB free"}[value]
    row = catalog_row("small", value)
    if verdict is not None:
        row = dataclasses.replace(row, fit=fit(value, summary=summary))
    card.show_facts(catalog_facts(row, False))
    if verdict is None:
        card.show_facts(catalog_facts(dataclasses.replace(row, entry=dataclasses.replace(row.entry, size=None)), False))
        assert card.reason.text() == "Known once the download starts: the server tells its size."
        card.show_facts(catalog_facts(row, False))
    colour = UNKNOWN_COLOUR if verdict is None else VERDICT_COLOURS[verdict]
    assert card.badge.property("colour") == colour and colour in card.badge.text()
    assert (VERDICT_WORDS[verdict] if verdict else "Not known yet") in card.badge.text()
    assert card.reason.text() == (summary or "Known once Kestrel has read this machine's memory.")
    assert card.badge.toolTip() == card.reason.toolTip() != ""  # the numbers on hover


def test_capability_tags_in_a_fixed_order_and_none_when_not_known(qtbot) -> None:
    card = ModelCard()
    qtbot.addWidget(card)
    details = {"format": "gguf", "capabilities": ["reasoning", "tools", "vision"]}
    card.show_facts(installed_facts(installed("mine", details=details)))
    assert [label.text() for label in card.tag_labels] == ["Vision", "Tools", "Reasoning"]
    card.show_facts(installed_facts(installed("mine", details={**details, "capabilities": ["tools"]})))
    assert [label.text() for label in card.tag_labels] == ["Tools"]
    card.show_facts(catalog_facts(catalog_row("small"), False))
    assert card.tag_labels == []  # the catalog says nothing of them: no tag, not a guess


def test_a_real_file_and_the_catalog_tag_what_their_templates_take(qtbot, tmp_path) -> None:
    """Tags come from what the file's own chat template shows (a Qwen3 template: tools and thinking), and from
    the catalog's entries, not from a guess by name."""
    from app.library.catalog import load_catalog
    from app.library.model_details import model_details
    from app.service.events import CatalogRow
    from tests.helpers.tool_call_gguf import build_tool_call_gguf

    card = ModelCard()
    qtbot.addWidget(card)
    details = model_details(build_tool_call_gguf(tmp_path / "caller.gguf"))
    card.show_facts(installed_facts(installed("caller", details=details)))
    assert [label.text() for label in card.tag_labels] == ["Tools", "Reasoning"]
    coder = next(e for e in load_catalog() if e.id == "qwen2.5-coder-1.5b-instruct-q4_k_m")
    card.show_facts(catalog_facts(CatalogRow(coder, fit("runs_well"), None), False))
    assert [label.text() for label in card.tag_labels] == ["Tools"]
    qwen3 = next(e for e in load_catalog() if e.id == "qwen3-8b-q4_k_m")
    card.show_facts(catalog_facts(CatalogRow(qwen3, fit("runs_well"), None), False))
    assert [label.text() for label in card.tag_labels] == ["Tools", "Reasoning"]


def test_publisher_from_a_hub_address_only() -> None:
    assert publisher_of("https://huggingface.co/Qwen/Qwen2.5-GGUF/resolve/main/q.gguf") == "Qwen"
    assert publisher_of("imported from /home/me/q.gguf") == "" and publisher_of("starter package") == ""


def test_a_long_name_is_elided_with_the_whole_name_on_hover(qtbot) -> None:
    card = ModelCard()
    qtbot.addWidget(card)
    card.show_facts(catalog_facts(catalog_row("small", name=LONG_NAME), False))
    card.resize(320, card.heightForWidth(320) if card.hasHeightForWidth() else 200)
    card.show()
    assert card.title.is_elided() and card.title.text().endswith("…")
    assert LONG_NAME in card.title.toolTip()


def test_cards_are_made_once_and_kept_through_listings_and_searches(qtbot) -> None:
    window, adapter = manager(qtbot)
    view = window.installed.view
    adapter.installed.set_listing([installed("alpha"), installed("beta"), installed("gamma")], 0)
    first = view.card("beta")
    adapter.installed.set_listing([installed("gamma"), installed("alpha"), installed("beta", is_loaded=True)], 0)
    assert view.keys() == ["gamma", "alpha", "beta"] and view.card("beta") is first
    assert first.action.text() == "Loaded"
    window.installed.search.setText("BET")
    assert view.keys() == ["beta"]
    window.installed.search.setText("")
    assert view.keys() == ["gamma", "alpha", "beta"] and view.built == 3
    adapter.installed.set_listing([installed("alpha")], 0)
    assert view.keys() == ["alpha"] and view.built == 3 and view.card("alpha").isVisibleTo(view)


def test_the_keyboard_chooses_a_card_and_enter_does_its_action(qtbot) -> None:
    window, adapter = manager(qtbot)
    page = window.installed
    adapter.installed.set_listing([installed("alpha"), installed("beta")], 0)
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    page.view.card("alpha").setFocus()  # as Tab reaches it
    qtbot.waitUntil(lambda: page.view.current_key == "alpha")
    assert page.selected_title.text() == "Alpha"
    QTest.keyClick(page.view.card("alpha"), Qt.Key.Key_Down)
    assert page.view.current_key == "beta" and page.view.card("beta").property("selected") is True
    QTest.keyClick(page.view.card("beta"), Qt.Key.Key_Return)
    assert adapter.spawned == [("load", "beta")]


def test_the_cards_follow_the_theme(qapp, qtbot) -> None:
    window, adapter = manager(qtbot)
    inner = window.installed.view.inner
    try:
        for dark in (True, False):
            apply_theme(qapp, "dark" if dark else "light")
            qtbot.waitUntil(lambda dark=dark: palette_colors(dark)[QPalette.ColorRole.Base] in inner.styleSheet())
    finally:
        apply_theme(qapp, "light")


def test_a_template_missing_from_the_file_points_to_the_settings_tab() -> None:
    text = details_html(installed("mine", details={"format": "gguf", "chat_template": False}))
    assert "set one on the Settings tab" in text and "below" not in text


def test_a_cancelled_download_says_cancelled_once_then_its_card_is_cleared(qtbot, monkeypatch) -> None:
    monkeypatch.setattr(downloads_view, "CLEAR_CANCELLED_MS", 50)
    window, adapter = manager(qtbot)
    page = window.downloads
    adapter.downloads.put(DownloadItem("d1", "Qwen", "running", done=0, total=1000))
    card = page.cards.card("d1")
    assert card.bar.isVisibleTo(card) and card.cancel_button.isVisibleTo(card)
    card.cancel_button.click()
    assert adapter.library.downloads.calls == [("cancel", "d1")]
    adapter.downloads.put(DownloadItem("d1", "Qwen", "cancelled", message="Cancelled; what had arrived was deleted."))
    shown = " / ".join(label.text() for label in card.findChildren(QLabel) if label.isVisibleTo(card))
    assert shown.count("Cancelled") == 1, shown
    assert not card.bar.isVisibleTo(card) and "%" not in shown  # no 0% bar left behind
    assert not any(button.isVisibleTo(card) for button in card.findChildren(QAbstractButton))
    qtbot.waitUntil(lambda: page.cards.keys() == [], timeout=2000)
    assert page.cards.empty.isVisibleTo(page.cards)
    adapter.downloads.put(DownloadItem("d2", "Phi", "running", done=1, total=10))
    assert page.cards.keys() == ["d2"]  # only the cancelled one was cleared


def test_a_failed_download_says_why_under_its_state(qtbot) -> None:
    window, adapter = manager(qtbot)
    adapter.downloads.put(DownloadItem("d1", "Qwen", "failed", message="There is no file at http://x/q.gguf (404)."))
    card = window.downloads.cards.card("d1")
    assert card.status.text() == "Failed" and card.message.text().startswith("There is no file at")
    assert card.resume_button.isVisibleTo(card) and card.cancel_button.isVisibleTo(card)
    assert card.resume_button.text() == "Try again"  # nothing arrived: nothing to resume
    adapter.downloads.put(DownloadItem("d1", "Qwen", "failed", done=5, total=10, message="The server hung up."))
    assert card.resume_button.text() == "Resume"


def clip_report(theme: str) -> list[str]:
    """Every label or button of the manager, on each page, that is narrower or lower than it needs, at the
    manager's minimum size: a label that wraps may be narrower if it is as tall as its text needs, and an
    ElidedLabel may cut its text if its tooltip holds the whole."""
    apply_theme(QApplication.instance(), theme)  # type: ignore[arg-type]
    adapter = FakeAdapter()
    window = ModelManager(adapter, adapter.library, adapter.settings)
    kept = installed("kept", is_default=True, is_loaded=True, details={
        "format": "gguf", "parameters_label": "1.5B", "quantization": "Q4_K_M", "capabilities": ["vision", "tools"]},
        model=dataclasses.replace(installed("kept").model, title=LONG_NAME, referenced=True,
                                  source="https://huggingface.co/Qwen/Q/resolve/main/q.gguf"))
    adapter.installed.set_listing([installed("mine"), kept, missing_row(),
                                   installed("slow", fit=fit("runs_slowly", summary="Runs slowly: on the CPU, as "
                                                              "the GPU has 2.1 GB free and it needs 3.4 GB"))], 10**9)
    adapter.catalog.set_rows([catalog_row("small", name=LONG_NAME), catalog_row("have", installed_id="have"),
                              catalog_row("unknown", None, size=None)])
    for number, state in enumerate(("running", "paused", "failed", "cancelled", "queued")):
        adapter.downloads.put(DownloadItem(f"d{number}", LONG_NAME, state, done=5, total=10, bytes_per_second=3e6,
                                           seconds_left=230, message="There is no file at http://127.0.0.1:9/x.gguf "
                                           "(404 Not Found). Check the link." if state == "failed" else ""))
    window.show()
    window.resize(window.minimumSize())
    window.installed.view.select(1)
    window.catalog.view.select(0)
    problems: list[str] = []
    scenes = [(window.installed, lambda: window.installed.pane_tabs.setCurrentIndex(0)),
              (window.installed, lambda: window.installed.pane_tabs.setCurrentIndex(1)),
              (window.catalog, lambda: None), (window.downloads, lambda: None)]
    for page, arrange in scenes:
        window.tabs.setCurrentWidget(page)
        arrange()
        QApplication.processEvents()
        for widget in window.findChildren(QWidget):
            if isinstance(widget, (QLabel, QAbstractButton)) and widget.isVisible():
                problems.extend(_cut(widget, f"{theme} {window.tabs.tabText(window.tabs.currentIndex())}"))
    window.close()
    window.deleteLater()
    return problems


def _cut(widget: QLabel | QAbstractButton, where: str) -> list[str]:
    name = f"{where}: {type(widget).__name__} {widget.objectName()!r} {getattr(widget, 'text', lambda: '')()!r}"
    hint = widget.sizeHint()
    if isinstance(widget, ElidedLabel):
        if widget.is_elided() and widget.full_text() not in widget.toolTip():
            return [f"{name} is elided without its text on hover"]
        return []
    if isinstance(widget, QLabel) and widget.wordWrap():
        if widget.height() < widget.heightForWidth(widget.width()):
            return [f"{name} is {widget.height()} high, its text needs {widget.heightForWidth(widget.width())}"]
        return []
    if widget.width() < hint.width() or widget.height() < widget.minimumSizeHint().height():
        return [f"{name} is {widget.width()}x{widget.height()}, needs {hint.width()}x{hint.height()}"]
    return []


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_nothing_in_the_manager_is_cut_at_its_minimum_size(qapp, theme) -> None:
    try:
        assert clip_report(theme) == []
    finally:
        apply_theme(qapp, "light")


def test_nothing_in_the_manager_is_cut_at_200_percent() -> None:
    """In a process of its own: the scale factor is read once, when the application starts."""
    script = ("import json, sys\nfrom PySide6.QtWidgets import QApplication\napp = QApplication(sys.argv)\n"
              "from tests.ui.test_model_cards import clip_report\n"
              "print(json.dumps(clip_report('light') + clip_report('dark')))\n")
    env = {**os.environ, "QT_SCALE_FACTOR": "2", "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_an_embedding_models_card_is_tagged_and_cannot_be_loaded_to_chat() -> None:
    import dataclasses as dc

    from app.library.model_files.model_purpose import ModelPurpose

    row = installed("minilm")
    row = dc.replace(row, model=dc.replace(row.model, purpose=ModelPurpose.EMBEDDING),
                     details={**row.details, "capabilities": ["embedding"]})
    facts = installed_facts(row)
    assert facts.tags == ("Embedding",) and not facts.action_enabled
    assert facts.action_tip.startswith("Minilm is an embedding model: it turns text into vectors")


def test_a_model_that_sees_names_its_projector_and_one_whose_projector_is_gone_says_so() -> None:
    seeing = details_html(installed("gemma", details={"format": "gguf", "chat_template": True,
                                                      "projector": "/models/gemma/mmproj-model-f16.gguf"}))
    assert "Vision projector" not in seeing  # the jargon is the explanation, not the label (issue 37)
    assert "Reads images:" in seeing and "yes, with /models/gemma/mmproj-model-f16.gguf (its vision projector)" in seeing
    gone = details_html(installed("gemma", details={"format": "gguf", "chat_template": True, "projector_missing":
                                                    "The vision projector /usb/mmproj.gguf is not there now, so the "
                                                    "model reads text only."}))
    assert "Reads images:" not in gone and "is not there now, so the model reads text only." in gone


def test_the_catalogs_vision_model_names_the_projector_it_downloads_with() -> None:
    from app.library.catalog import find_entry, load_catalog
    from app.service.events import CatalogRow
    from app.ui.models.manager_details import catalog_html

    entry = find_entry(load_catalog(), "gemma-3-4b-it-q4_k_m")
    assert entry is not None and entry.projector is not None
    text = catalog_html(CatalogRow(entry, None, None))
    assert "Vision projector" not in text and "Reads images:" in text
    assert "yes, with mmproj-model-f16.gguf (851.3 MB, downloaded with it; its vision projector)" in text
