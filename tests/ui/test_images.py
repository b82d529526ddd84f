"""Images in the composer: pasted, dropped or picked, checked off the UI thread into chips with a
thumbnail, refused ones red and not sent, and refused in place while the chat's model cannot see."""

from __future__ import annotations

import asyncio
import importlib

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QImage
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QWidget

from app.core.attachments import MAX_IMAGES, AttachedFile, AttachedSection
from app.ui.chat.attachment_chips import ChipState
from app.ui.chat.chat_attach import ChatAttach
from app.ui.chat.composer import Composer
from app.ui.chat.image_chips import THUMB_HEIGHT, ImageChip
from app.ui.messages.image_viewer import ImageViewer
from tests.helpers.scripted_engine import ScriptedEngine
from tests.helpers.vision_controller import ImageApi, png_image
from app.service.chats.vision import VisionState as Vision
from tests.ui.conftest import run, until

NOT_SEEING = ("Qwen3 8B cannot see images: it has no vision projector. Choose a model tagged Vision, "
              "such as Gemma 3 4B (Get a model).")


class FakeChats:
    """The chat and attach doors as far as the window's attaching asks them, apart from images (ImageApi adds them)."""

    def __init__(self) -> None:
        self.conversation = None
        self.messages: list[object] = []
        self.plain_sends: list[tuple[str, tuple[AttachedFile, ...], tuple]] = []

    async def read_attachments(self, paths):
        (path,) = paths
        return (AttachedFile(str(path), "text", 6, (AttachedSection("Notes."),)),)

    def send(self, text, attachments=(), images=()):
        self.plain_sends.append((text, tuple(attachments), tuple(images)))
        return True

    def chat_collections(self):
        return ()

    def answers_from(self):
        return None  # this PC answers

    async def set_chat_collections(self, names):
        pass

    def collection_names(self):
        return ()


@pytest.fixture
def images(qtbot, loop):
    window = QWidget()
    composer = Composer(window)
    composer.resize(700, 200)
    qtbot.addWidget(window)
    window.show()
    doors = FakeChats()
    api = ImageApi(doors, doors)
    wiring = ChatAttach(window, composer, doors, doors, loop.create_task)
    wiring.chat_opened()
    composer.sendRequested.connect(wiring.send)  # as the window wires it (and clears the box)
    return window, composer, api, wiring


def _settled(loop, composer: Composer) -> None:
    run(loop, until(lambda: not composer.tray.reading(), 10, "the image check"))


def test_a_pasted_image_is_checked_into_a_chip_with_a_thumbnail_and_sent_with_the_message(images, loop) -> None:
    _window, composer, api, wiring = images
    api.release = asyncio.Event()
    mime = QMimeData()
    mime.setImageData(QImage.fromData(png_image(640, 480)))  # what a screenshot tool puts on the clipboard
    QApplication.clipboard().setMimeData(mime)
    composer.edit.setFocus()
    QTest.keyClick(composer.edit, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    assert composer.edit.toPlainText() == ""
    (chip,) = composer.tray.chips
    assert isinstance(chip, ImageChip) and chip.state == ChipState.READING
    assert chip.label.text() == "Pasted image · Checking…"
    composer.edit.setPlainText("What is in this picture?")
    assert not composer.button.isEnabled()  # Send waits for the check
    api.release.set()
    _settled(loop, composer)
    assert chip.state == ChipState.READY and chip.label.text() == "Pasted image · 640 x 480"
    assert chip.thumb.isVisibleTo(chip) and chip.thumb.pixmap().deviceIndependentSize().height() == THUMB_HEIGHT
    assert chip.thumb.pixmap().deviceIndependentSize().width() == THUMB_HEIGHT * 640 // 480
    assert composer.button.isEnabled()
    composer.button.click()
    assert [(text, files, [(image.name, image.width, image.height) for image in sent])
            for text, files, sent in api.sent] == [("What is in this picture?", (), [("Pasted image", 640, 480)])]
    assert api.sent[0][2][0].data[:8] == b"\x89PNG\r\n\x1a\n"  # the clipboard's picture, as PNG bytes
    assert composer.tray.chips == []


def test_text_copied_with_a_picture_of_itself_pastes_as_text(images) -> None:
    _window, composer, api, _wiring = images
    mime = QMimeData()  # as a word processor copies a paragraph: its words, and a picture of them
    mime.setText("Quarterly figures")
    mime.setImageData(QImage.fromData(png_image(200, 20)))
    composer.edit.insertFromMimeData(mime)
    assert composer.edit.toPlainText() == "Quarterly figures" and composer.tray.chips == [] and api.checks == 0


def test_an_image_alone_can_be_sent_and_png_bytes_on_the_clipboard_go_as_they_are(images, loop) -> None:
    _window, composer, api, _wiring = images
    data = png_image(32, 20)
    mime = QMimeData()
    mime.setData("image/png", data)
    composer.edit.insertFromMimeData(mime)
    _settled(loop, composer)
    assert composer.button.isEnabled()  # no text: the image alone is a message
    composer.button.click()
    assert len(api.sent) == 1 and api.sent[0][0] == "" and api.sent[0][2][0].data == data


def test_image_files_dropped_on_the_window_are_checked_and_other_files_read(images, loop, tmp_path) -> None:
    window, composer, api, _wiring = images
    photo, notes = tmp_path / "Beach photo.PNG", tmp_path / "notes.md"
    photo.write_bytes(png_image(300, 200))
    notes.write_text("Notes.", encoding="utf-8")
    dropped = QMimeData()
    dropped.setUrls([QUrl.fromLocalFile(str(photo)), QUrl.fromLocalFile(str(notes))])
    over = composer.attach_button.mapTo(window, QPoint(2, 2))
    for kind in (QDragEnterEvent, QDropEvent):
        QApplication.sendEvent(window.windowHandle(), kind(over if kind is QDragEnterEvent else QPointF(over),
                                                           Qt.DropAction.CopyAction, dropped, Qt.MouseButton.NoButton,
                                                           Qt.KeyboardModifier.NoModifier))
    _settled(loop, composer)
    file_chip, image_chip = composer.tray.chips  # files first: each kind is added as it comes
    assert file_chip.file is not None and file_chip.file.name == "notes.md"
    assert image_chip.image is not None and image_chip.label.text() == "Beach photo.PNG · 300 x 200"
    assert image_chip.label.toolTip() == str(photo)
    assert composer.tray.images() == (image_chip.image,) and composer.tray.ready() == (file_chip.file,)


def test_an_image_the_check_refuses_is_red_with_the_reason_and_not_sent(images, loop, tmp_path) -> None:
    _window, composer, api, wiring = images
    fake = tmp_path / "holiday.jpg"
    fake.write_text("These are my holiday notes, not a picture.", encoding="utf-8")
    good = tmp_path / "cat.png"
    good.write_bytes(png_image(50, 50))
    wiring.attach([fake, good, good])  # the same file once
    _settled(loop, composer)
    refused, ready = composer.tray.chips
    assert refused.state == ChipState.REFUSED and not refused.thumb.isVisibleTo(refused)
    assert refused.label.text().startswith("holiday.jpg is not an image Kestrel can read.")  # the name said once
    assert "It will not be sent" in refused.label.toolTip()
    assert refused.label.palette().color(refused.label.foregroundRole()) == refused.refused_colour()
    assert ready.state == ChipState.READY
    assert wiring.send("Two pictures")
    assert [image.name for image in api.sent[0][2]] == ["cat.png"]


def test_while_the_model_cannot_see_the_image_button_is_greyed_and_images_are_refused_in_place(images, loop,
                                                                                             tmp_path) -> None:
    _window, composer, api, wiring = images
    assert composer.image_button.isEnabled() and "Add images" in composer.image_button.toolTip()
    api.set_vision(False, NOT_SEEING)
    wiring.refresh_vision()  # the window asks again when a model is chosen, loads or is added
    assert not composer.image_button.isEnabled()
    assert composer.image_button.toolTip() == f"Images cannot be added: {NOT_SEEING}"
    assert composer.image_button.accessibleDescription() == composer.image_button.toolTip()
    mime = QMimeData()
    mime.setImageData(QImage.fromData(png_image(40, 30)))
    composer.edit.insertFromMimeData(mime)
    photo = tmp_path / "photo.jpg"
    photo.write_bytes(png_image(40, 30))
    wiring.attach([photo])
    assert api.checks == 0  # refused before any check: nothing to wait for
    assert [(chip.state, chip.label.text()) for chip in composer.tray.chips] == [
        (ChipState.REFUSED, f"Pasted image · {NOT_SEEING}"), (ChipState.REFUSED, f"photo.jpg · {NOT_SEEING}")]
    composer.edit.setPlainText("And now?")
    composer.button.click()
    assert api.sent == [("And now?", (), ())]
    api.set_vision(True)
    wiring.chat_opened()  # another chat, or the same one with a model that sees
    assert composer.image_button.isEnabled()


def test_a_message_takes_at_most_max_images_and_the_next_one_says_why(images, loop) -> None:
    _window, composer, api, wiring = images
    for number in range(MAX_IMAGES + 1):
        mime = QMimeData()
        mime.setData("image/png", png_image(10 + number, 10))
        wiring.attach_image_data(bytes(mime.data("image/png").data()))
    _settled(loop, composer)
    states = [chip.state for chip in composer.tray.chips]
    assert states == [ChipState.READY] * MAX_IMAGES + [ChipState.REFUSED]
    assert f"at most {MAX_IMAGES} images" in composer.tray.chips[-1].label.text()
    composer.tray.remove(composer.tray.chips[0])  # one removed: room for another
    wiring.attach_image_data(png_image(5, 5))
    _settled(loop, composer)
    assert composer.tray.chips[-1].state == ChipState.READY and len(composer.tray.images()) == MAX_IMAGES


def test_images_waiting_for_a_message_stay_with_the_chat_they_were_attached_in(images, loop) -> None:
    _window, composer, api, wiring = images
    doors = api.chat
    chat = lambda chat_id: type("Chat", (), {"id": chat_id})()  # noqa: E731 - the open chat's id is all it reads
    doors.conversation, doors.messages = chat(1), [object()]
    wiring.chat_opened()
    wiring.attach_image_data(png_image(20, 10))
    doors.conversation = chat(2)
    wiring.chat_opened()
    assert composer.tray.chips == []
    _settled(loop, composer)
    doors.conversation = chat(1)
    wiring.chat_opened()
    assert [(chip.state, chip.label.text()) for chip in composer.tray.chips] == [
        (ChipState.READY, "Pasted image · 20 x 10")]


def test_the_paperclip_offers_images_and_documents_and_add_image_images(images, monkeypatch, tmp_path) -> None:
    _window, composer, _api, _wiring = images
    asked: list[tuple[str, str]] = []

    def ask(_parent, caption, _folder, file_filter, **_options):
        asked.append((caption, file_filter))
        return [], ""

    monkeypatch.setattr("app.ui.chat.chat_attach.QFileDialog.getOpenFileNames", ask)
    composer.attach_button.click()
    composer.image_button.click()
    (clip_caption, clip_filter), (image_caption, image_filter) = asked
    assert clip_filter.startswith("Images and documents (*.png *.jpg *.jpeg *.webp *.gif *.bmp *.pdf")
    assert image_caption == "Add images" and image_filter.startswith("Images (*.png") and ".pdf" not in image_filter
    # The documents' patterns come from the readers' registry: every format, a test's reader too.
    importlib.import_module("tests.documents.rot13_reader")
    composer.attach_button.click()
    documents = asked[-1][1].split(";;")[1]
    assert documents.startswith("Documents (*.pdf *.docx *.md") and all(f" {pattern}" in documents
                                                                        for pattern in ("*.py", "*.rst", "*.rot13"))


def test_in_the_window_an_image_goes_with_the_message_the_button_follows_the_model_and_tab_reaches_it(
        make_window, loop, tmp_path) -> None:
    window = make_window(engine=ScriptedEngine())
    api = ImageApi(window.doors.attach, window.doors.chat, accept=False)  # first a chat door that refuses the message
    composer = window.composer
    photo = tmp_path / "photo.png"
    photo.write_bytes(png_image(120, 90))
    window.attachments.attach([photo])
    _settled(loop, composer)
    composer.edit.setPlainText("Describe it")
    composer.button.click()
    assert [(text, [image.name for image in images]) for text, _files, images in api.sent] == [
        ("Describe it", ["photo.png"])]
    # Refused (the chat door says why, as a Problem): nothing the user gave is lost.
    assert len(composer.tray.chips) == 1 and composer.edit.toPlainText() == "Describe it"
    api.accept = True
    composer.button.click()
    assert len(api.sent) == 2 and api.sent[1][2] == api.sent[0][2]
    assert composer.tray.chips == [] and composer.edit.toPlainText() == ""
    api.set_vision(False, NOT_SEEING)
    window.adapter.modelStateChanged.emit()  # a model loaded (or failed): the window asks again
    assert not composer.image_button.isEnabled() and NOT_SEEING in composer.image_button.toolTip()
    api.set_vision(True)
    window.adapter.conversationOpened.emit()  # another chat, or this chat's model chosen
    assert composer.image_button.isEnabled()
    assert composer.attach_button.nextInFocusChain() is composer.image_button
    assert composer.image_button.nextInFocusChain() is composer.documents_button
    window.messages.imageChosen.emit(api.sent[0][2][0])
    viewer = window.findChild(ImageViewer)
    assert viewer is not None and viewer.isVisible() and viewer.name.text() == "photo.png"
    viewer.close()


def test_in_the_window_the_services_own_image_check_reads_a_file_and_refuses_text_named_jpg(
        make_window, loop, tmp_path) -> None:
    window = make_window(engine=ScriptedEngine())
    window.doors.attach.vision = lambda: Vision(True, "")  # a model that sees; the check is the service's
    composer = window.composer
    photo, fake = tmp_path / "photo.png", tmp_path / "holiday.jpg"
    photo.write_bytes(png_image(120, 90))
    fake.write_text("These are my holiday notes, not a picture.", encoding="utf-8")
    window.attachments.attach([photo, fake])
    _settled(loop, composer)
    ready, refused = composer.tray.chips
    assert ready.state == ChipState.READY and ready.label.text() == "photo.png · 120 x 90"
    assert ready.image is not None and ready.image.mime == "image/png" and ready.thumb.isVisibleTo(ready)
    assert refused.state == ChipState.REFUSED and refused.label.text().startswith("holiday.jpg ")
    assert "Kestrel failed" not in refused.label.text()  # the check's words, not a fault
