"""Documents in the window: files attached as chips (read off the UI thread, refused ones red and
not sent), sent with the message, the chat's collections, chips on messages and an answer's sources."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QAction, QDragEnterEvent, QDropEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QWidget

from app.core.attachments import AttachedFile, AttachedSection, SourceRef
from app.core.conversation import Message, MessageState, Role
from app.documents.values import Unreadable, UnreadableCause
from app.service.documents.document_context import AttachmentsUnreadable
from app.ui.chat.attachment_chips import ChipState
from app.ui.chat.chat_attach import ChatAttach
from app.ui.chat.composer import Composer
from app.ui.messages.message_documents import link_citations
from app.ui.state.message_words import attachment_label, source_label
from app.ui.state.message_model import MessageListModel
from app.ui.messages.message_view import MessageView
from app.ui.messages.source_popup import SourcePopup, source_url
from app.service.chats.vision import VisionState as Vision
from tests.ui.conftest import run, until

PDF = AttachedFile("/home/ann/report.pdf", "pdf", 48_000,
                   tuple(AttachedSection(f"Page {n} text.", page=n) for n in range(1, 13)))
NOTES = AttachedFile("C:\\Users\\ann\\notes.md", "markdown", 4_000, (AttachedSection("Notes."),))


class FakeDoors:
    """The chat door and the attach door as far as the window's attaching uses them: read_attachments,
    send(text, attachments), chat_collections, set_chat_collections, collection_names, and the open
    chat (conversation, messages)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, tuple[AttachedFile, ...]]] = []
        self.chosen: tuple[str, ...] = ()
        self.names = ("Papers", "Manuals")
        self.release = asyncio.Event()
        self.files = {Path(PDF.path): PDF, Path(NOTES.path): NOTES}
        self.conversation = None  # the open chat (None: a new one), as the window's chat_opened reads it
        self.messages: list[Message] = []

    async def read_attachments(self, paths):
        await self.release.wait()  # as a reader worker takes its time: the chip says Reading… meanwhile
        (path,) = paths
        if path in self.files:
            return (self.files[path],)
        raise AttachmentsUnreadable([Unreadable(path, "it is not a kind of file Kestrel reads",
                                                UnreadableCause.NOT_A_DOCUMENT)])

    def send(self, text, attachments=(), images=()):
        self.sent.append((text, tuple(attachments)))
        assert images == ()  # images: tests/ui/test_images.py
        return True

    def vision(self):
        return Vision(True, "")

    def answers_from(self):
        return None  # this PC answers

    def chat_collections(self):
        return self.chosen

    async def set_chat_collections(self, names):
        self.chosen = tuple(names)

    def collection_names(self):
        return self.names


@pytest.fixture
def attached(qtbot, loop):
    window = QWidget()
    composer = Composer(window)
    composer.resize(700, 200)
    qtbot.addWidget(window)
    window.show()
    doors = FakeDoors()
    wiring = ChatAttach(window, composer, doors, doors, loop.create_task)
    return window, composer, doors, wiring


def test_chip_labels_name_the_file_with_its_pages_or_its_size_and_sources_their_page() -> None:
    assert attachment_label(PDF) == "report.pdf · 12 pages"
    assert attachment_label(NOTES) == "notes.md · 4.0 KB"
    assert source_label(SourceRef(1, PDF.path, 12, None, "…")) == "[1] report.pdf, p. 12"
    assert source_label(SourceRef(2, NOTES.path, None, "Setup", "…")) == "[2] notes.md"


def test_files_are_read_off_the_ui_thread_and_a_refused_one_is_red_and_not_sent(attached, loop) -> None:
    _window, composer, doors, wiring = attached
    assert composer.attach_button.isVisibleTo(composer) and composer.documents_button.isVisibleTo(composer)
    wiring.attach([Path(PDF.path), Path("/home/ann/song.mp3"), Path(PDF.path)])
    chips = composer.tray.chips
    assert [chip.state for chip in chips] == [ChipState.READING, ChipState.READING]  # the same file once
    assert "Reading…" in chips[0].label.text()
    composer.edit.setPlainText("What does it say?")
    assert not composer.button.isEnabled()  # Send waits for the reading
    doors.release.set()
    run(loop, until(lambda: not composer.tray.reading(), 5))
    assert chips[0].state == ChipState.READY and chips[0].label.text() == "report.pdf · 12 pages"
    assert chips[1].state == ChipState.REFUSED and "It is not a kind of file Kestrel reads" in chips[1].label.text()
    assert composer.button.isEnabled()
    assert wiring.send(composer.edit.toPlainText())
    assert doors.sent == [("What does it say?", (PDF,))]
    assert composer.tray.chips == [] and not composer.tray.isVisibleTo(composer)


def test_files_waiting_for_a_message_stay_with_the_chat_they_were_attached_in(attached, loop) -> None:
    _window, composer, doors, wiring = attached
    chat = lambda chat_id: type("Chat", (), {"id": chat_id})()  # noqa: E731 - the open chat's id is all it reads
    doors.conversation, doors.messages = chat(1), [object()]
    wiring.chat_opened()
    wiring.attach([Path(PDF.path)])  # read while another chat is open: it is read all the same
    doors.conversation = chat(2)
    wiring.chat_opened()
    assert composer.tray.chips == [] and not composer.tray.isVisibleTo(composer)
    doors.release.set()
    wiring.attach([Path(NOTES.path)])
    run(loop, until(lambda: not composer.tray.reading(), 5))
    doors.conversation = chat(1)
    wiring.chat_opened()
    assert [(chip.path, chip.state) for chip in composer.tray.chips] == [(Path(PDF.path), ChipState.READY)]
    assert wiring.send("About chat 1's file")
    assert doors.sent == [("About chat 1's file", (PDF,))]
    doors.conversation = chat(2)
    wiring.chat_opened()
    assert composer.tray.ready() == (NOTES,)
    # A new chat saved before its first message (its settings changed) keeps its files.
    doors.conversation, doors.messages = None, []
    wiring.chat_opened()
    wiring.attach([Path(PDF.path)])
    run(loop, until(lambda: not composer.tray.reading(), 5))
    doors.conversation = chat(3)
    wiring.chat_opened()
    assert composer.tray.ready() == (PDF,)


def test_a_fault_while_reading_still_raises_but_leaves_send_usable(attached, loop) -> None:
    _window, composer, doors, _wiring = attached

    async def broken(path):
        raise RuntimeError("a bug in the reader")

    faults = []
    composer.tray.attach([Path(PDF.path)], broken, lambda coroutine: faults.append(loop.create_task(coroutine)))
    run(loop, until(lambda: faults[0].done(), 5))
    assert isinstance(faults[0].exception(), RuntimeError)
    assert composer.tray.chips[0].state == ChipState.REFUSED and "fault in Kestrel" in composer.tray.chips[0].reason
    composer.edit.setPlainText("Still here?")
    assert composer.button.isEnabled() and composer.tray.ready() == ()


def test_files_alone_can_be_sent_and_a_removed_chip_is_not(attached, loop) -> None:
    _window, composer, doors, wiring = attached
    doors.release.set()
    wiring.attach([Path(PDF.path), Path(NOTES.path)])
    run(loop, until(lambda: not composer.tray.reading(), 5))
    composer.tray.chips[0].remove_button.click()
    assert composer.button.isEnabled()  # no text: the file is the message
    sent = []
    composer.sendRequested.connect(sent.append)
    composer.button.click()
    assert sent == [""]
    assert wiring.send("")
    assert doors.sent == [("", (NOTES,))]


def test_files_pasted_in_the_box_or_dropped_on_the_window_are_attached(attached, loop) -> None:
    window, composer, doors, _wiring = attached
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(PDF.path)])
    composer.edit.insertFromMimeData(mime)  # what Ctrl+V does with a file manager's copy
    assert [chip.path.name for chip in composer.tray.chips] == ["report.pdf"]
    assert composer.edit.toPlainText() == ""  # its name is not typed
    dropped = QMimeData()
    dropped.setUrls([QUrl.fromLocalFile("/home/ann/notes.md")])
    # Through the window system's side, as a real drag comes, on a part that takes no drops itself.
    over = composer.attach_button.mapTo(window, QPoint(2, 2))
    for kind in (QDragEnterEvent, QDropEvent):
        QApplication.sendEvent(window.windowHandle(), kind(over if kind is QDragEnterEvent else QPointF(over),
                                                           Qt.DropAction.CopyAction, dropped, Qt.MouseButton.NoButton,
                                                           Qt.KeyboardModifier.NoModifier))
    assert [chip.path.name for chip in composer.tray.chips] == ["report.pdf", "notes.md"]
    doors.release.set()
    run(loop, until(lambda: not composer.tray.reading(), 5))


def test_the_documents_menu_checks_the_chats_collections_and_manages_them(attached, loop) -> None:
    window, composer, doors, wiring = attached
    doors.chosen = ("Manuals",)
    wiring.chat_opened()
    assert composer.documents_button.text() == "Documents · 1"
    composer.documents_menu.aboutToShow.emit()
    actions = {action.text(): action for action in composer.documents_menu.actions() if action.text()}
    assert actions["Manuals"].isChecked() and not actions["Papers"].isChecked()
    actions["Papers"].toggle()
    run(loop, until(lambda: doors.chosen == ("Papers", "Manuals"), 5))
    run(loop, until(lambda: composer.documents_button.text() == "Documents · 2", 5))
    documents = QAction("Documents…", window)
    documents.setObjectName("showDocuments")  # the docspage helper's View → Documents…
    opened = []
    documents.triggered.connect(lambda: opened.append(True))
    window.addAction(documents)
    actions["Manage documents…"].trigger()
    assert opened == [True]


@pytest.fixture
def chat(qtbot):
    model = MessageListModel()
    sources = (SourceRef(1, PDF.path, 12, "Results", "Revenue grew 12% in the third quarter."),
               SourceRef(2, NOTES.path, None, None, "Call Bob on Monday."))
    model.reset_to([Message(1, 1, Role.USER, "Summarise these.", 0.0, MessageState.COMPLETE, None,
                            attachments=(PDF, NOTES)),
                    Message(2, 1, Role.ASSISTANT, "Revenue grew [1]; call Bob [2].", 0.0, MessageState.COMPLETE,
                            None, sources=sources)])
    view = MessageView()
    view.setModel(model)
    view.resize(900, 600)
    qtbot.addWidget(view)
    view.show()
    qtbot.waitExposed(view)
    QTest.qWait(20)
    return view


def test_a_users_files_and_an_answers_sources_are_chips_under_them(chat) -> None:
    delegate = chat.delegate
    user, answer = (chat.model().index(row, 0) for row in range(2))
    user_layout, answer_layout = delegate.layout(user), delegate.layout(answer)
    chips = delegate.documents.chips(delegate.message(user), user_layout.documents)
    assert [label for label, _ in chips] == ["report.pdf · 12 pages", "notes.md · 4.0 KB"]
    assert chips[-1][1].right() == user_layout.column.right()  # at the right, under the bubble
    assert user_layout.documents.top() > user_layout.bubble.bottom()
    assert user_layout.actions.top() > chips[-1][1].bottom()
    sources = delegate.documents.chips(delegate.message(answer), answer_layout.documents)
    assert [label for label, _ in sources] == ["[1] report.pdf, p. 12", "[2] notes.md"]
    assert answer_layout.documents.top() > answer_layout.text.bottom()
    assert chat.visualRect(answer).height() >= answer_layout.actions.bottom() - chat.visualRect(answer).top()
    heard = chat.model().data(answer, Qt.ItemDataRole.AccessibleTextRole)
    assert heard.endswith("(sources: [1] report.pdf, p. 12; [2] notes.md)")


def test_a_click_on_a_source_chip_opens_its_text_and_the_pdf_at_its_page(chat, qtbot, tmp_path) -> None:
    delegate = chat.delegate
    answer = chat.model().index(1, 0)
    rect = delegate.documents.chips(delegate.message(answer), delegate.layout(answer).documents)[0][1]
    chosen = []
    chat.sourceChosen.connect(chosen.append)
    QTest.mouseClick(chat.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert [source.number for source in chosen] == [1]
    assert delegate.chip_at(answer, QPoint(rect.left() - 30, rect.center().y())) is None
    gone = SourcePopup(chosen[0])
    qtbot.addWidget(gone)
    assert "no longer there" in gone.where.text() and not gone.open_button.isEnabled()
    assert gone.text.toPlainText() == "Revenue grew 12% in the third quarter."
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(b"%PDF-1.4")
    opened: list[QUrl] = []
    popup = SourcePopup(SourceRef(1, str(pdf), 12, None, "…"), opener=lambda url: opened.append(url) or True)
    qtbot.addWidget(popup)
    popup.open_button.click()
    assert len(opened) == 1 and opened[0].fragment() == "page=12" and opened[0].toLocalFile() == str(pdf)
    refused: list[QUrl] = []  # a system that will not take the page: the file opens at its start
    popup = SourcePopup(SourceRef(1, str(pdf), 12, None, "…"), opener=lambda url: refused.append(url) or False)
    qtbot.addWidget(popup)
    popup.open_button.click()
    assert [url.hasFragment() for url in refused] == [True, False]
    assert source_url(SourceRef(2, str(tmp_path / "notes.md"), None, None, "")).fragment() == ""


def test_a_citation_in_the_answers_text_opens_its_source_and_one_without_a_source_is_words(chat) -> None:
    delegate = chat.delegate
    answer = chat.model().index(1, 0)
    text = delegate.layout(answer).text
    line = text.top() + delegate.body_of(answer).documents[0].documentLayout().blockBoundingRect(
        delegate.body_of(answer).documents[0].begin()).height() / 2
    linked = {}
    for x in range(text.left(), text.right(), 2):
        href = delegate.anchor_at(answer, QPoint(x, int(line)))
        linked.setdefault(href, x)
    assert {"kestrel-source:1", "kestrel-source:2"} <= set(linked)
    chosen = []
    chat.sourceChosen.connect(chosen.append)
    QTest.mouseClick(chat.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(linked["kestrel-source:2"], int(line)))
    assert [source.number for source in chosen] == [2]
    assert link_citations("<p>[3] and <code>[1]</code></p>", (SourceRef(1, "/a.md", None, None, ""),)) == \
        "<p>[3] and <code>[1]</code></p>"  # [3] names no source; code stays code


def test_the_paperclip_opens_in_documents_then_where_files_were_last_attached_and_leaves_the_box_focused(
        attached, monkeypatch, tmp_path) -> None:
    window, composer, doors, wiring = attached
    from app.ui.chat import chat_attach

    documents = tmp_path / "Documents"
    documents.mkdir()
    monkeypatch.setattr(chat_attach, "documents_folder", lambda make=True: str(documents))
    asked: list[str] = []
    answers = [[str(PDF.path)], []]

    def dialog(parent, title, folder, filters, **options):
        asked.append(folder)
        return answers.pop(0), ""

    monkeypatch.setattr(chat_attach.QFileDialog, "getOpenFileNames", dialog)
    wiring.choose_files()
    assert [chip.path for chip in composer.tray.chips] == [Path(PDF.path)]
    assert window.focusWidget() is composer.edit  # the last to take focus in it: the question comes next
    wiring.choose_files()  # cancelled: nothing more attached
    assert asked == [str(documents), str(Path(PDF.path).parent)] and len(composer.tray.chips) == 1
