"""The sidebar over the real chat list: dates, elided titles, markers, choosing, searching, renaming, deleting."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QColor, QFontMetrics, QHelpEvent, QPalette
from PySide6.QtWidgets import QStyle, QStyleOptionViewItem, QToolButton, QToolTip

from app.core.conversation import Conversation
from app.core.generation import GenerationSettings
from app.ui.state.conversation_model import ConversationListModel, ConversationRoles
from app.ui.chat.conversation_delegate import contrast
from app.ui.chat.sidebar import SEARCH_DEBOUNCE_MS, Sidebar, relative_date
from app.ui.common.theme import apply_theme

NOW = datetime(2026, 11, 30, 16, 5)  # a Monday
LONG = "Explain the difference between a mutex and a semaphore, with a long example in Rust and then in C"


@pytest.mark.parametrize(("then", "words"), [
    (datetime(2026, 11, 30, 14, 2), "14:02"),
    (datetime(2026, 11, 30, 0, 0), "00:00"),
    (datetime(2026, 11, 29, 23, 59), "Yesterday"),
    (datetime(2026, 11, 29, 0, 1), "Yesterday"),
    (datetime(2026, 11, 28, 9, 0), "Saturday"),
    (datetime(2026, 11, 24, 9, 0), "Tuesday"),  # six days ago
    (datetime(2026, 11, 23, 18, 0), "23 Nov"),  # a week ago: "Monday" would read as today's
    (datetime(2026, 3, 12, 8, 0), "12 Mar"),
    (datetime(2026, 1, 1, 0, 0), "1 Jan"),
    (datetime(2025, 12, 31, 23, 0), "31 Dec 2025"),
    (datetime(2025, 3, 12, 8, 0), "12 Mar 2025"),
    (datetime(2027, 2, 1, 8, 0), "1 Feb 2027"),  # a clock that was ahead
])
def test_relative_dates(then: datetime, words: str) -> None:
    assert relative_date(then.timestamp(), NOW) == words


def test_relative_dates_across_new_year() -> None:
    new_year = datetime(2027, 1, 1, 10, 0)
    assert relative_date(datetime(2026, 12, 31, 22, 0).timestamp(), new_year) == "Yesterday"
    assert relative_date(datetime(2026, 12, 28, 22, 0).timestamp(), new_year) == "Monday"
    assert relative_date(datetime(2026, 12, 20, 22, 0).timestamp(), new_year) == "20 Dec 2026"


class Adapter(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.conversations = ConversationListModel(self)


def conversation(conversation_id: int, title: str, when: datetime) -> Conversation:
    return Conversation(conversation_id, title, when.timestamp(), when.timestamp(), "", GenerationSettings(), None)


@pytest.fixture
def sidebar(qtbot) -> Sidebar:
    adapter = Adapter()
    now = datetime.now()
    adapter.conversations.reset_to((conversation(1, LONG, now), conversation(2, "Trip plan", now - timedelta(days=1)),
                                    conversation(3, "Recipes", now - timedelta(days=400))))
    widget = Sidebar(adapter)
    adapter.setParent(widget)
    qtbot.addWidget(widget)
    widget.resize(260, 400)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def row(sidebar: Sidebar, number: int):
    return sidebar.filter.index(number, 0)


def option_for(sidebar: Sidebar, index) -> QStyleOptionViewItem:
    option = QStyleOptionViewItem()
    option.initFrom(sidebar.conversation_list.viewport())
    option.rect = sidebar.conversation_list.visualRect(index)
    option.font = sidebar.conversation_list.font()
    return option


def test_a_long_title_is_painted_on_one_line_ending_in_an_ellipsis(sidebar: Sidebar) -> None:
    delegate, index = sidebar.delegate, row(sidebar, 0)
    option = option_for(sidebar, index)
    room = delegate.title_rect(option, index)
    shown = delegate.elided_title(index, room.width(), option.font)
    assert shown.endswith("…") and len(shown) < len(LONG)
    assert LONG.startswith(shown[:-1])
    assert QFontMetrics(option.font).horizontalAdvance(shown) <= room.width()
    # The date keeps its place at the right, outside the title's room.
    assert room.right() < option.rect.right() - QFontMetrics(option.font).horizontalAdvance("00:00")
    assert delegate.elided_title(row(sidebar, 1), room.width(), option.font) == "Trip plan"


def test_a_title_with_line_breaks_stays_on_one_line(sidebar: Sidebar) -> None:
    source = sidebar.filter.sourceModel()
    source.setData(source.index(1), "Two\nlines")
    assert sidebar.delegate.elided_title(row(sidebar, 1), 500, sidebar.font()) == "Two lines"


def test_rows_show_relative_dates(sidebar: Sidebar) -> None:
    delegate = sidebar.delegate
    assert ":" in delegate.date_text(row(sidebar, 0))
    assert delegate.date_text(row(sidebar, 1)) == "Yesterday"
    assert delegate.date_text(row(sidebar, 2))[-4:].isdigit()  # another year


def test_markers_follow_answering_waiting_and_draft(sidebar: Sidebar, qtbot) -> None:
    model, delegate = sidebar.filter.sourceModel(), sidebar.delegate
    assert [delegate.markers(row(sidebar, n)) for n in range(3)] == [(), (), ()]
    model.set_answers(1, (2,))
    model.set_drafted(2, True)
    model.set_drafted(3, True)
    assert [delegate.markers(row(sidebar, n)) for n in range(3)] == [("busy",), ("waiting", "edit"), ("edit",)]
    # The busy dot breathes only while a chat answers.
    assert sidebar._pulse_timer.isActive()
    model.set_answers(None, (2,))
    assert not sidebar._pulse_timer.isActive() and delegate.markers(row(sidebar, 0)) == ()
    # A row with markers gives its title less room: the markers are drawn, not overlapped.
    plain = delegate.title_rect(option_for(sidebar, row(sidebar, 0)), row(sidebar, 0)).width()
    model.set_drafted(1, True)
    assert delegate.title_rect(option_for(sidebar, row(sidebar, 0)), row(sidebar, 0)).width() < plain
    sidebar.conversation_list.grab()  # paints every marker kind without a warning


def test_a_click_chooses_the_chat(sidebar: Sidebar, qtbot) -> None:
    view = sidebar.conversation_list
    centre = view.visualRect(row(sidebar, 1)).center()
    with qtbot.waitSignal(sidebar.conversationChosen) as chosen:
        qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=centre)
    assert chosen.args == [2]


def test_select_marks_the_row_without_choosing_it(sidebar: Sidebar, qtbot) -> None:
    with qtbot.assertNotEmitted(sidebar.conversationChosen):
        sidebar.select(3)
        assert sidebar.conversation_list.currentIndex().data(ConversationRoles.ID) == 3
        assert sidebar.conversation_list.selectionModel().isSelected(row(sidebar, 2))
        sidebar.select(None)
        assert not sidebar.conversation_list.selectionModel().hasSelection()
        sidebar.select(2)
        # A search that hides the open chat and then shows it again keeps it selected.
        sidebar.filter.set_matches({1})
        sidebar.filter.set_matches(None)
        assert sidebar.conversation_list.currentIndex().data(ConversationRoles.ID) == 2
        sidebar.filter.sourceModel().reset_to(tuple(sidebar.filter.sourceModel()._items))
        assert sidebar.conversation_list.currentIndex().data(ConversationRoles.ID) == 2


def test_search_waits_for_a_pause_and_says_it_once(sidebar: Sidebar, qtbot) -> None:
    said: list[str] = []
    sidebar.searchChanged.connect(said.append)
    assert not sidebar.clear_action.isVisible()  # nothing to clear yet
    qtbot.keyClicks(sidebar.search, "mutex")
    assert said == []
    qtbot.wait(SEARCH_DEBOUNCE_MS * 2)
    assert said == ["mutex"]
    clear = sidebar.clear_action
    assert clear.isVisible() and not clear.icon().isNull()
    button = next(b for b in sidebar.search.findChildren(QToolButton) if b.defaultAction() is clear)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)  # the field's own clear button
    qtbot.waitUntil(lambda: said == ["mutex", ""])
    assert sidebar.search.text() == "" and not clear.isVisible()


def test_delete_key_asks_to_delete_the_current_chat(sidebar: Sidebar, qtbot) -> None:
    view = sidebar.conversation_list
    sidebar.select(2)
    view.setFocus()
    qtbot.waitUntil(view.hasFocus)
    with qtbot.waitSignal(sidebar.deleteRequested) as asked:
        qtbot.keyClick(view, Qt.Key.Key_Delete)
    assert asked.args == [2, "Trip plan"]
    assert sidebar.filter.sourceModel().rowCount() == 3  # the window asks first, then deletes
    # Delete in the search box edits the text, not the chats.
    sidebar.search.setText("ab")
    sidebar.search.setFocus()
    sidebar.search.setCursorPosition(0)
    with qtbot.assertNotEmitted(sidebar.deleteRequested):
        qtbot.keyClick(sidebar.search, Qt.Key.Key_Delete)
    assert sidebar.search.text() == "b"


def test_the_context_menu_offers_rename_and_delete(sidebar: Sidebar, qtbot) -> None:
    view = sidebar.conversation_list
    assert [a.text() for a in view.actions()] == ["Rename", "Delete…"]
    sidebar.select(1)
    with qtbot.waitSignal(sidebar.deleteRequested) as asked:
        sidebar.delete_action.trigger()
    assert asked.args == [1, LONG]


def test_f2_renames_in_place(sidebar: Sidebar, qtbot) -> None:
    view, model = sidebar.conversation_list, sidebar.filter.sourceModel()
    sidebar.select(2)
    view.setFocus()
    qtbot.waitUntil(view.hasFocus)
    qtbot.keyClick(view, Qt.Key.Key_F2)
    editor = view.focusWidget()
    assert editor is not view and editor.text() == "Trip plan"
    # The editor sits inside the row, not over its neighbours.
    assert view.visualRect(row(sidebar, 1)).contains(editor.geometry().center())
    with qtbot.waitSignal(model.renameRequested) as renamed:
        editor.setText("Lisbon trip")
        qtbot.keyClick(editor, Qt.Key.Key_Return)
    assert renamed.args == [2, "Lisbon trip"]
    assert row(sidebar, 1).data() == "Lisbon trip"


def test_new_chat_button(sidebar: Sidebar, qtbot) -> None:
    assert not sidebar.new_button.icon().isNull()
    with qtbot.waitSignal(sidebar.newChatRequested):
        qtbot.mouseClick(sidebar.new_button, Qt.MouseButton.LeftButton)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_dates_and_the_busy_dot_stay_readable_on_selected_and_hovered_rows(sidebar: Sidebar, qapp, theme) -> None:
    saved = qapp.palette()
    try:
        apply_theme(qapp, theme)
        index = row(sidebar, 0)
        for state in (QStyle.StateFlag.State_None, QStyle.StateFlag.State_MouseOver, QStyle.StateFlag.State_Selected,
                      QStyle.StateFlag.State_Selected | QStyle.StateFlag.State_HasFocus):
            option = option_for(sidebar, index)
            option.widget = sidebar.conversation_list
            option.state |= state
            colors = sidebar.delegate.row_colors(option)
            ground = sidebar.conversation_list.viewport().palette().color(QPalette.ColorRole.Window)
            behind = ground if colors.fill is None else blend(colors.fill, ground)
            assert contrast(colors.text, behind) >= 4.5, state
            assert contrast(colors.muted, behind) >= 4.5, state
            assert contrast(colors.accent, behind) >= 3.0, state
    finally:
        qapp.setPalette(saved)


def blend(top: QColor, bottom: QColor) -> QColor:
    a = top.alphaF()
    return QColor.fromRgbF(top.redF() * a + bottom.redF() * (1 - a), top.greenF() * a + bottom.greenF() * (1 - a),
                           top.blueF() * a + bottom.blueF() * (1 - a))


def test_contrast_is_wcag_s_ratio() -> None:
    assert contrast(QColor("#000000"), QColor("#ffffff")) == pytest.approx(21.0)
    assert contrast(QColor("#767676"), QColor("#ffffff")) == pytest.approx(4.54, abs=0.01)


def test_enter_chooses_the_current_chat(sidebar: Sidebar, qtbot) -> None:
    view = sidebar.conversation_list
    sidebar.select(3)
    view.setFocus()
    qtbot.waitUntil(view.hasFocus)
    with qtbot.waitSignal(sidebar.conversationChosen) as chosen:
        qtbot.keyClick(view, Qt.Key.Key_Up)
        qtbot.keyClick(view, Qt.Key.Key_Return)
    assert chosen.args == [2]


def test_the_tooltip_says_what_the_markers_mean(sidebar: Sidebar, qtbot) -> None:
    sidebar.filter.sourceModel().set_answers(None, (2,))
    view, index = sidebar.conversation_list, row(sidebar, 1)
    centre = view.visualRect(index).center()
    event = QHelpEvent(QEvent.Type.ToolTip, centre, view.viewport().mapToGlobal(centre))
    assert sidebar.delegate.helpEvent(event, view, option_for(sidebar, index), index)
    qtbot.waitUntil(QToolTip.isVisible)
    assert QToolTip.text().splitlines()[0] == "Trip plan"
    assert QToolTip.text().splitlines()[-1] == "Waiting for another chat's answer"
    QToolTip.hideText()


def test_screen_readers_hear_the_markers_and_the_date(sidebar: Sidebar) -> None:
    sidebar.filter.sourceModel().set_answers(None, (2,))
    sidebar.filter.sourceModel().set_drafted(2, True)
    described = row(sidebar, 1).data(Qt.ItemDataRole.AccessibleDescriptionRole)
    assert described == "Waiting for another chat's answer, Has an unsent draft, changed Yesterday"
    assert row(sidebar, 1).data() == "Trip plan"
