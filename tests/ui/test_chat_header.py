"""The chat header: the elided title, the model picker's menu over the installed models, and its signals."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from PySide6.QtCore import QObject, Qt

from app.library.installed import InstalledModel
from app.service.events import ModelRow
from app.ui.chat.chat_header import ChatHeader
from app.ui.state.model_items import InstalledModelsModel


def model_row(model_id: str, title: str, missing: bool = False) -> ModelRow:
    model = InstalledModel(id=model_id, title=title, path=Path(f"/m/{model_id}.gguf"), size=1_000_000,
                           sha256=None, source="imported", added=0.0, format="gguf", referenced=missing,
                           missing=missing)
    return ModelRow(model, {"format": "gguf"}, None, None, False, False)


class Adapter(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.installed = InstalledModelsModel(self)


@pytest.fixture
def header(qtbot) -> ChatHeader:
    adapter = Adapter()
    adapter.installed.set_listing([model_row("qwen", "Qwen 2.5 1.5B"), model_row("gemma", "Gemma 3 270M"),
                                   model_row("gone", "Llama on a USB disk", missing=True)], 0)
    widget = ChatHeader(adapter)
    adapter.setParent(widget)
    qtbot.addWidget(widget)
    widget.resize(640, 48)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def entries(header: ChatHeader) -> list[tuple[str, bool, bool]]:
    """(text, enabled, checked) of every menu entry; separators as "---"."""
    return [("---", False, False) if a.isSeparator() else (a.text(), a.isEnabled(), a.isChecked())
            for a in header.model_menu.actions()]


def test_the_menu_lists_each_installed_model_once_with_the_default_marked_and_the_manager(header: ChatHeader) -> None:
    header.set_model(None, "Gemma 3 270M")
    assert entries(header) == [("Qwen 2.5 1.5B", True, False), ("Gemma 3 270M (default)", True, True),
                               ("Llama on a USB disk (missing)", False, False),
                               ("---", False, False), ("Manage models…", True, False)]
    assert header.model_button.text() == "Gemma 3 270M"


def test_the_model_made_the_default_is_listed_once_not_again_as_default_model(qtbot) -> None:
    """The library's default (bold in the manager) and the one the window names for it were two entries."""
    adapter = Adapter()
    starter = model_row("starter", "Qwen2.5 Coder 0.5B Instruct (Q4_K_M, starter)")
    adapter.installed.set_listing([dataclasses.replace(starter, is_default=True, is_loaded=True),
                                   model_row("qwen", "Qwen 2.5 1.5B")], 0)
    widget = ChatHeader(adapter)
    adapter.setParent(widget)
    qtbot.addWidget(widget)
    widget.set_model(None, "Qwen2.5 Coder 0.5B Instruct (Q4_K_M, starter)")
    texts = [text for text, _, _ in entries(widget)]
    assert texts == ["Qwen2.5 Coder 0.5B Instruct (Q4_K_M, starter) (default)", "Qwen 2.5 1.5B", "---",
                     "Manage models…"]
    assert sum("Qwen2.5 Coder 0.5B" in text for text in texts) == 1
    widget.set_model("qwen", "Qwen2.5 Coder 0.5B Instruct (Q4_K_M, starter)")
    assert [a.isChecked() for a in widget.model_actions()] == [False, True]


def test_a_default_that_is_not_listed_keeps_an_entry_of_its_own(header: ChatHeader) -> None:
    header.set_model(None, "A model from elsewhere")
    assert entries(header)[:2] == [("Default model (A model from elsewhere)", True, True),
                                   ("Qwen 2.5 1.5B", True, False)]


def test_choosing_a_model_says_its_id_and_the_default_says_none(header: ChatHeader, qtbot) -> None:
    header.set_model(None, "Gemma 3 270M")
    chosen: list[object] = []
    header.modelChosen.connect(chosen.append)
    header.model_actions()[0].trigger()
    header.model_actions()[1].trigger()
    assert chosen == ["qwen", None]  # the default's entry: follow the default, no model of the chat's own
    # The check stays on the chat's model until the window says the choice was taken.
    header.model_actions()[0].trigger()
    assert [a.isChecked() for a in header.model_actions()] == [False, True, False]
    header.set_model("qwen", "Gemma 3 270M")
    assert [a.isChecked() for a in header.model_actions()] == [True, False, False]


def test_manage_models_asks_for_the_manager(header: ChatHeader, qtbot) -> None:
    with qtbot.waitSignal(header.managerRequested):
        header.model_menu.actions()[-1].trigger()


def test_the_button_follows_set_model(header: ChatHeader) -> None:
    header.set_model("qwen", "Gemma 3 270M")
    assert header.model_button.text() == "Qwen 2.5 1.5B"
    assert [a.isChecked() for a in header.model_actions()] == [True, False, False]
    header.set_model("gone", "Gemma 3 270M")
    assert header.model_button.text() == "Llama on a USB disk (missing)"
    header.set_model(None, "")
    assert header.model_button.text() == "No model chosen"
    assert header.model_menu.actions()[0].text() == "Default model (none set)"


def test_the_model_name_is_whole_when_the_header_has_room_and_elided_only_when_not(header: ChatHeader) -> None:
    name = "Qwen2.5 Coder 0.5B Instruct (Q4_K_M, starter)"
    header._installed.set_listing([model_row("starter", name)], 0)
    header.set_title("Planning the trip to Lisbon")
    header.set_model("starter", "")
    header.resize(1340, 48)  # a 1600 px window less the chats list
    assert header.model_button.text() == name
    assert header.title.text() == "Planning the trip to Lisbon"
    header.resize(420, 48)
    shown = header.model_button.text()
    assert shown.endswith("…") and name.startswith(shown[:-1])
    assert header.model_button.toolTip().startswith(f"Model for this chat: {name}")
    assert header.model_button.geometry().right() < header.settings_button.geometry().left()
    header.resize(1340, 48)
    assert header.model_button.text() == name


def test_the_menu_follows_the_library(header: ChatHeader, qtbot) -> None:
    installed = header._installed
    header.set_model("qwen", "Gemma 3 270M")
    installed.set_listing([model_row("qwen", "Qwen 2.5 1.5B (renamed)"), model_row("phi", "Phi 4 mini")], 0)
    assert [text for text, _, _ in entries(header)] == [
        "Default model (Gemma 3 270M)", "Qwen 2.5 1.5B (renamed)", "Phi 4 mini", "---", "Manage models…"]
    assert header.model_button.text() == "Qwen 2.5 1.5B (renamed)"
    # A chosen model removed from the library stays in the menu, checked and greyed, so the choice is not hidden.
    installed.set_listing([model_row("phi", "Phi 4 mini")], 0)
    assert ("qwen (missing)", False, True) in entries(header)


@pytest.mark.qt_log_ignore("This plugin does not support grabbing the keyboard")  # a popup, offscreen
def test_the_button_opens_the_menu(header: ChatHeader, qtbot) -> None:
    qtbot.mouseClick(header.model_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(header.model_menu.isVisible)
    header.model_menu.close()


def test_settings_button(header: ChatHeader, qtbot) -> None:
    button = header.settings_button
    assert button.toolTip() == "Chat settings (Ctrl+.)" and not button.icon().isNull()
    with qtbot.waitSignal(header.settingsRequested):
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def test_a_long_title_is_elided_and_kept_whole_in_its_tooltip(header: ChatHeader) -> None:
    title = "A very long conversation title " * 6
    header.set_title(title)
    shown = header.title.text()
    assert shown.endswith("…") and len(shown) < len(title.strip())
    assert header.title.toolTip() == header.title.full_text() == " ".join(title.split())
    assert header.title.fontMetrics().horizontalAdvance(shown) <= header.title.width()
    header.set_title("Short")
    assert (header.title.text(), header.title.toolTip()) == ("Short", "")
    assert header.title.font().bold()


def test_an_ampersand_in_a_name_is_shown_not_taken_as_a_shortcut(header: ChatHeader) -> None:
    header._installed.set_listing([model_row("rp", "R&P 7B")], 0)
    assert header.model_actions()[1].text() == "R&&P 7B"


def test_an_embedding_model_is_not_offered_to_chat(header: ChatHeader) -> None:
    from app.library.model_files.model_purpose import ModelPurpose

    embed = model_row("minilm", "all-MiniLM-L6-v2")
    embed = dataclasses.replace(embed, model=dataclasses.replace(embed.model, purpose=ModelPurpose.EMBEDDING))
    header._installed.set_listing([model_row("qwen", "Qwen 2.5 1.5B"), embed], 0)
    header.set_model(None, "Qwen 2.5 1.5B")
    assert [text for text, _, _ in entries(header)] == ["Qwen 2.5 1.5B (default)", "---", "Manage models…"]
