"""Opens every form and dialog of the window and names each text that is cut (run in a child process).

    QT_SCALE_FACTOR=2 QT_QPA_PLATFORM=offscreen python -m tests.helpers.clip_probe OUT.json

A scale factor must be set before the QApplication exists, so each scale is its own
process; tests/ui/test_no_clipped_text.py runs one per scale. The JSON written is
{"problems": [...], "scenes": [...]}: each problem names the scene, the theme, the
widget and its text.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtWidgets import (QAbstractButton, QAbstractItemView, QAbstractSpinBox, QApplication, QCheckBox,
                               QComboBox, QDialogButtonBox, QFileDialog, QHeaderView, QLabel, QPushButton,
                               QRadioButton, QStyle, QStyleFactory, QStyleOptionComboBox, QStyleOptionViewItem,
                               QTableView, QTabWidget, QTreeView, QWidget)

from app.ui.common.window_look import shortcut_letter_extra
from app.ui.common.text_room import ELIDED_COLUMNS, FULL_TEXT, title_width_needed
from tests.helpers import memory_scenes, server_scenes

# A widget that cuts its text on purpose (and shows all of it some other way) says so.
ELIDES = "elidesOnPurpose"
# The rows of a table looked at: enough for every scene's, few enough for a long list.
ROWS_LOOKED_AT = 60


def needed_width(widget: QWidget) -> int | None:
    """The width widget needs to show all of its text, or None when it is not one checked here."""
    if isinstance(widget, QLabel):
        if widget.wordWrap() or not widget.text():
            return None
        return widget.sizeHint().width() + (shortcut_letter_extra(widget) if widget.buddy() is not None else 0)
    if isinstance(widget, (QCheckBox, QRadioButton)):
        return widget.sizeHint().width() + shortcut_letter_extra(widget) if widget.text() else None
    if isinstance(widget, QPushButton):
        # Its text has the button's margins either side: the shortcut letter's pixel fits in them.
        return widget.sizeHint().width() if widget.text() else None
    if isinstance(widget, QAbstractButton):
        return None  # tool buttons: icons, and the internals of tab bars and line edits
    if isinstance(widget, QComboBox):
        if widget.isEditable() or not widget.currentText():
            return None
        option = QStyleOptionComboBox()
        widget.initStyleOption(option)
        metrics = widget.fontMetrics()
        text = metrics.horizontalAdvance(widget.currentText())
        if not widget.itemIcon(widget.currentIndex()).isNull():
            text += widget.iconSize().width() + 4
        contents = QSize(text, max(metrics.height(), widget.iconSize().height()))
        return widget.style().sizeFromContents(QStyle.ContentsType.CT_ComboBox, option, contents, widget).width()
    if isinstance(widget, QAbstractSpinBox):
        edit = widget.findChild(QWidget, "qt_spinbox_lineedit")
        if edit is None or not widget.text():
            return None
        # Compared with the inner line edit: its margins and cursor take about 6 px.
        return widget.fontMetrics().horizontalAdvance(widget.text()) + 6 - edit.width() + widget.width()
    return None


def shown_width(widget: QWidget) -> int | None:
    """How much of widget's width is on screen: its own, less what its ancestors cut off
    (None: none of it is, e.g. scrolled out of view)."""
    region = widget.visibleRegion()
    if region.isEmpty():
        return None
    return min(widget.width(), region.boundingRect().width())


def describe(widget: QWidget) -> str:
    text = widget.currentText() if isinstance(widget, QComboBox) else getattr(widget, "text", lambda: "")()
    name = widget.objectName() or ""
    return f"{type(widget).__name__}{'#' + name if name else ''} {text!r}"


def clipped(root: QWidget) -> list[str]:
    """Each visible label, check box, radio button, push button, combo box or spin box in
    root whose shown width is less than its text needs, as "what: shown < needed"."""
    found = []
    for widget in [root, *root.findChildren(QWidget)]:
        if not widget.isVisibleTo(root) or widget.property(ELIDES):
            continue
        need = needed_width(widget)
        if need is None:
            continue
        shown = shown_width(widget)
        if shown is not None and shown < need:
            found.append(f"{describe(widget)}: {shown} px shown < {need} px needed")
    return found


def cut_cells(root: QWidget) -> list[str]:
    """Each cell of a table or tree in root whose text does not fit its cell: wider than its
    column (elided, at the end or in the middle) or taller than its row. A column the view
    names in its ELIDED_COLUMNS property elides on purpose (a path that keeps its end, shown
    whole in the tooltip). Qt's file dialog is cut_dates' (its names elide as every file manager's)."""
    found = []
    for view in [root, *root.findChildren(QAbstractItemView)]:
        if not isinstance(view, (QTableView, QTreeView)) or not view.isVisibleTo(root) or view.model() is None:
            continue
        if isinstance(view.window(), QFileDialog) or view.property(ELIDES):
            continue
        on_purpose = set(view.property(ELIDED_COLUMNS) or ())
        model = view.model()
        for row in range(min(model.rowCount(view.rootIndex()), ROWS_LOOKED_AT)):
            for column in range(model.columnCount(view.rootIndex())):
                if column in on_purpose or _column_hidden(view, column):
                    continue
                problem = _cut_cell(view, model.index(row, column, view.rootIndex()))
                if problem:
                    found.append(problem)
    return found


def _column_hidden(view: QAbstractItemView, column: int) -> bool:
    header = view.horizontalHeader() if isinstance(view, QTableView) else view.header()  # type: ignore[union-attr]
    return isinstance(header, QHeaderView) and header.isSectionHidden(column)


def _cut_cell(view: QAbstractItemView, index: Any) -> str:
    """"what: shown < needed" when index's text does not fit the cell it is drawn in ("" when it does)."""
    text = index.data(Qt.ItemDataRole.DisplayRole)
    cell = view.visualRect(index)
    if not isinstance(text, str) or not text.strip() or cell.isEmpty():
        return ""
    option = QStyleOptionViewItem()
    view.initViewItemOption(option)
    option.rect = cell
    view.itemDelegateForIndex(index).initStyleOption(option, index)
    style = view.style()
    room = style.subElementRect(QStyle.SubElement.SE_ItemViewItemText, option, view)
    margin = style.pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, view) + 1
    width, metrics = room.width() - 2 * margin, option.fontMetrics
    wraps = bool(option.features & QStyleOptionViewItem.ViewItemFeature.WrapText)
    flags = Qt.TextFlag.TextWordWrap if wraps else Qt.TextFlag.TextSingleLine
    lines = text.split("\n")
    if wraps:
        need = metrics.boundingRect(QRect(0, 0, max(width, 1), 100_000), int(flags), text)
        need_width = max(metrics.horizontalAdvance(word) for word in text.split())
    else:
        need = QRect(0, 0, max(metrics.horizontalAdvance(line) for line in lines), len(lines) * metrics.lineSpacing())
        need_width = need.width()
    where = f"{type(view).__name__}#{view.objectName()} cell ({index.row()}, {index.column()}) {text!r}"
    if need_width > width:
        return f"{where}: {width} px wide < {need_width} px needed"
    if need.height() > room.height() + 1:  # the last line's leading may overhang by a pixel
        return f"{where}: {room.height()} px tall < {need.height()} px needed"
    return ""


def elided_with_room(root: QWidget) -> list[str]:
    """Each widget in root that elides its text by hand (its whole text in its FULL_TEXT
    property) while root has the room to show all of it: more width than its layout's least."""
    found = []
    spare = root.width() - root.minimumSizeHint().width()
    for widget in [root, *root.findChildren(QWidget)]:
        full = widget.property(FULL_TEXT)
        if not full or not widget.isVisibleTo(root):
            continue
        shown = str(getattr(widget, "text", lambda: "")()).replace("&&", "&")
        missing = widget.fontMetrics().horizontalAdvance(full) - widget.fontMetrics().horizontalAdvance(shown)
        if shown != full and missing <= spare:
            found.append(f"{describe(widget)} elides {full!r} with {spare} px to spare (it needs {missing} px more)")
    return found


def cut_title(root: QWidget) -> list[str]:
    """root's window title, when the title bar of a window as wide as root would elide it."""
    title = root.windowTitle() if root.isWindow() else ""
    need = title_width_needed(root) if title else 0
    if need > root.width():
        return [f"window title {title!r}: window {root.width()} px wide < {need} px its title bar needs"]
    return []


def stock_icons(root: QWidget) -> list[str]:
    """Each button of a dialog button box in root whose icon is not one of the app's."""
    from app.ui.common import icons
    from app.ui.common.app_style import NAME_PREFIX

    found = []
    for box in root.findChildren(QDialogButtonBox):
        for button in box.buttons():
            icon = button.icon()
            if not icon.isNull() and not icon.name().startswith(NAME_PREFIX) and not icons.is_themed(button):
                found.append(f"{describe(button)}: a stock icon ({icon.name() or 'unnamed'})")
    return found


def cut_dates(root: QWidget) -> list[str]:
    """Qt's own file dialog: each date in its list wider than the "Date Modified" column."""
    view = root.findChild(QTreeView, "treeView") if isinstance(root, QFileDialog) else None
    if view is None or view.header().count() < 4:
        return []
    model, found = view.model(), []
    for row in range(model.rowCount(view.rootIndex())):
        text = str(model.index(row, 3, view.rootIndex()).data() or "")
        need = view.fontMetrics().horizontalAdvance(text) + 8
        if need > view.header().sectionSize(3):
            found.append(f"file dialog date {text!r}: {view.header().sectionSize(3)} px shown < {need} px needed")
    return found


def tab_states(root: QWidget) -> Iterator[str]:
    """Show each page of each tab widget in root in turn (the page's name, "" for none)."""
    tabs = [t for t in root.findChildren(QTabWidget) if t.isVisibleTo(root)]
    if not tabs:
        yield ""
        return
    for tab in tabs:
        for index in range(tab.count()):
            tab.setCurrentIndex(index)
            yield tab.tabText(index).replace("&", "")
        tab.setCurrentIndex(0)


# --- the scenes ---------------------------------------------------------------------------


def settle(seconds: float = 0.05) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        QApplication.processEvents()
        time.sleep(0.005)
    QApplication.processEvents()


def wait(loop: asyncio.AbstractEventLoop, awaitable: Awaitable[Any], timeout: float = 30) -> Any:
    task = asyncio.ensure_future(awaitable, loop=loop)
    deadline = time.monotonic() + timeout
    while not task.done():
        if time.monotonic() > deadline:
            task.cancel()
            raise TimeoutError("the scene did not get ready")
        settle(0.01)
    return task.result()


def scenes(window: Any, service: Any, loop: asyncio.AbstractEventLoop,
           home: Path) -> list[tuple[str, Callable[[], QWidget]]]:
    """(name, a function that opens it) for every form and dialog of the window."""
    from PySide6.QtWidgets import QFileDialog, QMessageBox

    from app.ui.common.save_files import save_dialog
    from app.ui.settings.dialogs import ConversationSettingsDialog, EditMessageDialog, SettingsDialog
    from app.ui.models.hardware_view import HardwareWindow
    from app.ui.settings.mcp_json_dialog import McpJsonDialog
    from app.ui.models.model_manager import ModelManager
    from app.ui.server.server_window import NEW_KEY_QUESTION, ServerWindow
    from app.service.library.hardware_overview import HardwareOverview, report_text
    from tests.hardware.machines import recorded_report
    from tests.helpers import attachment_scenes

    doors = window.doors

    def settings() -> QWidget:
        from app.service.models import kv_cache

        # Saved states on disk, as after a few chats: the note beside Clear then says how many and how big.
        kv_cache.states_folder().mkdir(parents=True, exist_ok=True)
        for number in range(3):
            (kv_cache.states_folder() / f"state-{number}.kvstate").write_bytes(bytes(3_500_000))
        shown = SettingsDialog(doors.settings.settings, window, adapter=window.adapter, model=doors.model,
                               tools=doors.tools, mcp_file=window.paths.mcp_file, show_memory=window.memory.show_window)
        wait(loop, _until(lambda: bool(shown.states_note.text())))  # read off the UI thread
        return shown

    def chat_settings() -> QWidget:
        prompt, generation = doors.chat.conversation_settings()
        return ConversationSettingsDialog(prompt, generation, window, servers=["files", "time"])

    def hardware() -> QWidget:
        report = recorded_report("windows_desktop_rtx4070")
        return HardwareWindow(HardwareOverview(report=report, loaded=None, model_name="", placement_reason="",
                                               fallback_reasons=(), priority_problem=None, threads="",
                                               text=report_text(report, None, None, "")), window)

    def export() -> QWidget:
        dialog = save_dialog(window, "Export this chat", str(home / "Trip.md"), "Markdown (*.md)")
        dialog.setOption(QFileDialog.Option.DontUseNativeDialog)  # offscreen has no native one
        return dialog

    def question() -> QWidget:
        return QMessageBox(QMessageBox.Icon.Question, "New key", NEW_KEY_QUESTION,
                           QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, window)

    def manager() -> QWidget:
        shown = ModelManager(window.adapter, doors.library, doors.settings, window)
        wait(loop, doors.library.refresh())
        wait(loop, doors.library.speech_refresh())  # Models → Speech: its list, a model chosen in it
        cards = shown.installed.view
        if cards.keys():
            cards.select(0)
        speech = shown.speech.tree
        speech.setCurrentItem(speech.topLevelItem(4))
        return shown

    def hub_search() -> QWidget:
        """Get a model's Hugging Face search with the repositories of a recorded hub answer and one
        repository's files (a choice with its vision projector among them), as a search and a
        listing on 127.0.0.1 would leave it."""
        from app.library.download.unit import FileSpec
        from app.library.huggingface.hub import DownloadUnit
        from app.library.huggingface.hub_search import RepoChoice, parse_search_answer
        from app.service.library.hub_search import ChoiceRow, RepoListing
        from tests.helpers.hub_answers import RECORDED_ANSWER

        shown = ModelManager(window.adapter, doors.library, doors.settings, window)
        shown.tabs.setCurrentWidget(shown.catalog)
        shown.catalog.side_tabs.setCurrentWidget(shown.catalog.hub_search)
        box = shown.catalog.hub_search
        box.query.setText("gemma")
        box.timer.stop()
        # The hub's own answer, recorded (tests/fixtures/hub/README.md): real names, some of them long.
        box._show_repos(tuple(parse_search_answer(RECORDED_ANSWER.read_bytes(), "http://127.0.0.1/api/models")))
        base = "http://127.0.0.1/ggml-org/gemma-3-4b-it-GGUF/resolve/main/"

        def unit(name: str, size: int, projector: bool) -> DownloadUnit:
            files = [FileSpec(base + name, name, None, size)]
            if projector:
                files.append(FileSpec(base + "mmproj-model-f16.gguf", "mmproj-model-f16.gguf", None, 851_251_104))
            return DownloadUnit(name, name, "gguf", tuple(files), base + name,
                                projector="mmproj-model-f16.gguf" if projector else None)

        box._listing = "ggml-org/gemma-3-4b-it-GGUF"
        box.files_note.setText("ggml-org/gemma-3-4b-it-GGUF: pick a quantization and press its Download.")
        box._show_files(RepoListing("ggml-org/gemma-3-4b-it-GGUF", (
            ChoiceRow(RepoChoice(unit("gemma-3-4b-it-Q4_K_M.gguf", 2_489_757_856, True), "Q4_K_M"), None,
                      "Whether it fits is not known yet."),
            ChoiceRow(RepoChoice(unit("gemma-3-4b-it-f16.gguf", 7_767_184_160, False), "F16"), None,
                      "Whether it fits is not known yet."))))
        return shown

    def first_run() -> QWidget:
        from app.ui.models.first_run import FirstRunOffer

        wait(loop, doors.library.refresh())
        offer = FirstRunOffer()
        offer.show_offer(doors.library.recommended())
        return offer

    return [
        ("settings", settings),
        ("chat settings", chat_settings),
        ("edit message", lambda: EditMessageDialog("Summarise this, please.", window)),
        ("about", lambda: _about(window)),
        ("hardware", hardware),
        ("server window", lambda: ServerWindow(window.adapter, doors.settings, doors.api, window.server, window)),
        ("export", export),
        ("mcp json", lambda: McpJsonDialog("", window)),
        ("question", question),
        ("first run", first_run),
        ("model manager", manager),
        ("hugging face search", hub_search),
        ("attachments", attachment_scenes.composer_with_chips),
        ("source popup", lambda: attachment_scenes.source_popup(window)),
        ("message with images", attachment_scenes.message_with_images),
        ("image viewer", lambda: attachment_scenes.image_viewer(window)),
        ("documents empty", lambda: _documents(window, service, loop, home, filled=False)),
        ("documents", lambda: _documents(window, service, loop, home, filled=True)),
        ("collection name", lambda: _collection_name(window)),
        ("chat header", lambda: _chat_header(home)),
        ("add a server", lambda: server_scenes.add_server_dialog(window)),
        ("model manager with servers", lambda: server_scenes.manager_with_servers(window, lambda w: wait(loop, w))),
        ("server model settings", lambda: server_scenes.remote_model_settings(window, said=True)),
        ("server model settings not said", lambda: server_scenes.remote_model_settings(window, said=False)),
        ("memory empty", lambda: _memory(window, loop, filled=False)),
        ("memory", lambda: _memory(window, loop, filled=True)),
        ("memory text", lambda: _memory_text(window)),
        ("used memories", lambda: _used_memories(window, loop)),
        ("memory proposal", lambda: memory_scenes.proposal_rows(window)),
        ("remember", lambda: _remember(window, loop)),
        ("temporary chat", lambda: _temporary_sidebar(window)),
        ("project dialog", _project_dialog),
        ("projects panel", _projects_panel),
        # Last: it turns Kestrel Link's sharing on (a real TLS server on 127.0.0.1) for the scenes after it.
        ("add another kestrel", lambda: server_scenes.add_another_kestrel(window)),
        ("kestrel link sharing", lambda: server_scenes.sharing_window(window, lambda w: wait(loop, w))),
    ]


def _documents(window: Any, service: Any, loop: asyncio.AbstractEventLoop, home: Path, *, filled: bool) -> QWidget:
    """The Documents window over a stand-in service: empty, or with a collection read while
    an answer is written, a file refused with a long reason, and the embedding line."""
    from app.service import events as ev
    from app.service.doors.documents import DocumentsDoor
    from app.ui.documents.documents_window import DocumentsWindow
    from tests.helpers.documents_fake import FakeDocuments, collection

    real = service.collections
    fake = FakeDocuments(service.bus.emit)
    if filled:
        folder = home / "Documents" / "Quarterly reports"
        fake.infos = [collection("Quarterly reports", folder, state=ev.IndexState.WAITING, files=860, unreadable=2,
                                 last_indexed=time.time() - 130),
                      collection("Notes", home / "Notes", files=41, last_indexed=time.time() - 90_000)]
        # The reasons as the PDF reader words them (app/documents/readers/pdf/pages.py): the advice is at the end.
        fake.file_lists["Quarterly reports"] = (
            ev.FileInfo(folder / "2024" / "scanned contract.pdf", "unreadable",
                        "scanned PDF without text: its pages are images, and Kestrel does not read text from "
                        "images (OCR)", 0),
            ev.FileInfo(folder / "2024" / "salaries.pdf", "unreadable", "password-protected PDF: save a copy "
                        "without the password (Print → Save as PDF) to add it", 0),
            ev.FileInfo(folder / "budget.docx", "indexed", "", 12),
            ev.FileInfo(folder / "summary.md", "pending", "", 0))
    service.collections = fake
    try:
        shown = DocumentsWindow(window.adapter, DocumentsDoor(service), window)
    finally:
        service.collections = real
    if filled:
        shown.show_progress(ev.IndexingProgress("Quarterly reports", ev.IndexState.WAITING, 120, 860, 130.0,
                                                "Waiting while an answer is written"))
        wait(loop, asyncio.sleep(0.05))  # the file list is asked for off the UI thread
        from app.library.installed import InstalledModel
        from app.library.model_files.model_purpose import ModelPurpose

        minilm = InstalledModel(id="all-minilm-l6-v2", title="all-MiniLM-L6-v2 (embedding)",
                                path=home / "minilm.gguf", size=45_000_000, sha256=None, source="catalog",
                                added=0.0, format="gguf", purpose=ModelPurpose.EMBEDDING)
        shown.embedding.show_choice(minilm.id, [minilm])  # the picker, as once a model is chosen
    return shown


# Memories as a person keeps them: short ones, one long, one from a chat, one turned off.
MEMORIES = ("My daughter is called Ada; she is seven and loves drawing horses.",
            "I write Python at work and prefer short answers with code first, explanations after, and no "
            "apologies; when I ask for a command, give the command alone.",
            "I live in Lisbon.", "I am vegetarian.")


def _memory(window: Any, loop: asyncio.AbstractEventLoop, *, filled: bool) -> QWidget:
    """The Memory window: empty, or with memories from a chat and by hand, one turned off, one selected."""
    from app.core.memories import MemoryOrigin
    from app.ui.memory.memory_window import MemoryWindow

    door = window.doors.memory
    wait(loop, door.clear())
    if filled:
        chat = window.doors.chat
        chat.new_conversation()
        wait(loop, chat.set_conversation_settings(*chat.conversation_settings()))
        wait(loop, window.doors.history.rename_conversation(chat.conversation.id, "Planning the trip to Lisbon"))
        for number, text in enumerate(MEMORIES):
            origin = MemoryOrigin.TOOL if number == 2 else MemoryOrigin.HAND
            added = wait(loop, door.add(text, origin, chat.conversation.id if number == 2 else None))
        wait(loop, door.set_enabled(added.memory.id, False))
    shown = MemoryWindow(window.adapter, door, window.doors.settings, window.doors.subscribe, window)
    wait(loop, _until(lambda: shown.model.rowCount() == (len(MEMORIES) if filled else 0) and not shown._loading))
    if filled:
        shown.table.selectRow(1)
    return shown


def _memory_text(window: Any) -> QWidget:
    from app.ui.memory.memory_parts import MemoryTextDialog

    return MemoryTextDialog("Edit a memory", MEMORIES[1], window)


def _used_memories(window: Any, loop: asyncio.AbstractEventLoop) -> QWidget:
    from app.ui.memory.used_memories import UsedMemoriesPopup

    kept = wait(loop, window.doors.memory.listing())
    return UsedMemoriesPopup(kept[:3], 4, window)


def _remember(window: Any, loop: asyncio.AbstractEventLoop) -> QWidget:
    """A message's Remember with a long answer's text, kept too long: the door's refusal said under it."""
    from app.ui.messages.remember_dialog import RememberDialog

    text = ("For the trip, pack light: two shirts, a warm jumper, walking shoes and a rain jacket. " * 14).strip()
    dialog = RememberDialog(text, None, window.doors.memory, window.adapter.spawn, window)
    dialog.remember()
    wait(loop, _until(lambda: dialog.problem.isVisibleTo(dialog)))
    return dialog


def _temporary_sidebar(window: Any) -> QWidget:
    """The sidebar while a temporary chat is open: its line above the list says what that chat keeps."""
    from app.ui.chat.sidebar import Sidebar

    sidebar = Sidebar(window.adapter)
    sidebar.show_temporary(True)
    sidebar.resize(260, 360)
    return sidebar


def _project_dialog() -> QWidget:
    """Edit project with long instructions, a model no longer installed, and tools and collections to tick."""
    from app.core.projects import Project
    from app.ui.projects.project_dialog import ProjectChoices, ProjectDialog

    choices = ProjectChoices(models=(("starter", "Qwen2.5 Coder 0.5B Instruct (Q4_K_M, starter)"),),
                             tools=("files", "calendar"), collections=("Quarterly reports", "Thesis papers"))
    project = Project(1, "Planning the trip to Lisbon", "Plan by the day. " * 40, "gone-model", ("files",),
                      ("Thesis papers", "Old notes"), False)
    dialog = ProjectDialog(choices, project)
    dialog.refuse('There is already a project called "Planning the trip to Lisbon". Choose another name.')
    return dialog


def _projects_panel() -> QWidget:
    """The chat list's Projects grouping, as wide as the sidebar, with a long name."""
    from app.core.projects import Project
    from app.ui.projects.projects_panel import ListedProject, ProjectsPanel

    panel = ProjectsPanel()
    panel.model.reset_to([ListedProject(Project(1, "Garden"), 3), ListedProject(Project(2, "Thesis"), 12),
                          ListedProject(Project(3, "Planning the trip to Lisbon"), 1)])
    panel.choose(2)
    panel.resize(260, panel.sizeHint().height())
    return panel


async def _until(ready: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not ready() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


def _chat_header(home: Path) -> QWidget:
    """The header above a chat with the starter chosen, as wide as a 1600 px window's chat column."""
    from PySide6.QtCore import QObject

    from app.library.installed import InstalledModel
    from app.service.library_events import ModelRow
    from app.ui.chat.chat_header import ChatHeader
    from app.ui.state.model_items import InstalledModelsModel

    class Listing(QObject):
        def __init__(self) -> None:
            super().__init__()
            self.installed = InstalledModelsModel(self)

    starter = InstalledModel(id="starter", title="Qwen2.5 Coder 0.5B Instruct (Q4_K_M, starter)",
                             path=home / "starter.gguf", size=400_000_000, sha256=None, source="catalog",
                             added=0.0, format="gguf")
    listing = Listing()
    listing.installed.set_listing([ModelRow(starter, {"format": "gguf"}, None, None, True, True)], 0)
    header = ChatHeader(listing)
    listing.setParent(header)
    header.set_title("Planning the trip to Lisbon")
    header.set_model(None, starter.title)
    header.resize(min(1600 - 260, header.screen().availableGeometry().width()), 48)  # less the chats list
    return header


def _collection_name(window: Any) -> QWidget:
    from app.ui.documents.documents_window import name_dialog

    return name_dialog(window, "Quarterly reports")


def _about(window: Any) -> QWidget:
    from app.ui.about import AboutDialog

    return AboutDialog(window.paths, window, open_url=lambda _url: True)


def _icons_on_buttons() -> type:
    from app.ui.common.app_style import AppStyle

    class IconsOnButtons(AppStyle):
        """The app's style as under GNOME or KDE, whose dialog buttons carry icons (offscreen's carry none)."""

        def styleHint(self, hint: QStyle.StyleHint, *args: Any) -> int:  # Override QProxyStyle.styleHint.
            if hint == QStyle.StyleHint.SH_DialogButtonBox_ButtonsHaveIcons:
                return 1
            return super().styleHint(hint, *args)

    return IconsOnButtons


def look_at(name: str, theme: str, opened: QWidget, shots: Path | None = None) -> list[str]:
    opened.show()
    settle()
    problems = []
    for page in tab_states(opened):
        settle(0.02)
        where = f"{name}{' → ' + page if page else ''} ({theme})"
        found = clipped(opened) + stock_icons(opened) + cut_dates(opened) + cut_cells(opened) + cut_title(opened)
        found += elided_with_room(opened)
        problems += [f"{where}: {problem}" for problem in found]
        if shots is not None:
            scale = os.environ.get("QT_SCALE_FACTOR", "1")
            file = f"{name}-{page}-{theme}-{scale}".replace(" ", "_").replace("/", "_") + ".png"
            opened.grab().save(str(shots / file))
    opened.close()
    opened.deleteLater()
    return problems


def _as_on_windows(home: Path) -> None:
    """Models → Speech and Settings → Voice as on Windows: tests/helpers/fake_winrt first on the path, answering
    with tests/fixtures/windows_voices' voices (tests/helpers/windows_speech.py does the same for the tests)."""
    import app.voice.synthesis.windows_voices as windows_voices
    from tests.helpers import windows_speech
    config = home / "fake_winrt.json"
    config.write_text(json.dumps({"voices": windows_speech.VOICES, "default": windows_speech.IDS["zira"],
                                  "rates": windows_speech.RATES, "fail": {}, "log": str(home / "fake_winrt.log")}),
                      encoding="utf-8")
    os.environ["KESTREL_FAKE_WINRT"] = str(config)
    sys.path.insert(0, str(windows_speech.FAKE_WINRT))
    windows_voices.ON_WINDOWS = True
    windows_voices._module_here.cache_clear()


def main(out: Path) -> int:
    import qasync

    home = Path(tempfile.mkdtemp(prefix="kestrel-clip-"))
    os.environ["KESTREL_HOME"] = str(home)
    if os.environ.get("KESTREL_CLIP_WINDOWS"):  # Windows' own voices listed, through PyWinRT's stand-in
        _as_on_windows(home)
    app = QApplication(sys.argv[:1])
    app.setStyle(_icons_on_buttons()(QStyleFactory.create("Fusion")))
    loop = qasync.QEventLoop(app, already_running=True)
    asyncio.set_event_loop(loop)

    from app.core.paths import data_paths
    from app.ui.app import build_service, build_window
    from app.ui.common.theme import apply_theme
    from tests.helpers.scripted_engine import ScriptedEngine
    from tests.helpers.tiny_gguf import build_tiny_gguf
    from tests.ui.conftest import install_model

    install_model(build_tiny_gguf(home / "tiny.gguf"))
    service = build_service(data_paths(), ScriptedEngine())
    window = build_window(service, data_paths())
    window.show()
    wait(loop, service.start_up())
    problems: list[str] = []
    names = []
    # For a person to look at: KESTREL_CLIP_SHOTS=FOLDER saves each scene as a PNG.
    shots = Path(os.environ["KESTREL_CLIP_SHOTS"]) if os.environ.get("KESTREL_CLIP_SHOTS") else None
    # For a quick look at a few: KESTREL_CLIP_SCENES="about,settings" opens only those. KESTREL_CLIP_WINDOWS=1: as
    # on Windows, with its own voices in Models → Speech and Settings → Voice.
    only = {name.strip() for name in os.environ.get("KESTREL_CLIP_SCENES", "").split(",") if name.strip()}
    for theme in ("light", "dark"):
        apply_theme(app, theme)
        for name, opener in scenes(window, service, loop, home):
            if only and name not in only:
                continue
            names.append(f"{name} ({theme})")
            problems += look_at(name, theme, opener(), shots)
    wait(loop, service.shutdown())
    out.write_text(json.dumps({"problems": problems, "scenes": names}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    code = main(Path(sys.argv[1]))
    sys.stdout.flush()
    # Not a normal exit: tearing Qt down with the service's worker threads still
    # parked aborts the process, and the findings are already written.
    os._exit(code)
