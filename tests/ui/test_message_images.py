"""Images on a user's message: thumbnails under the bubble (sized before they are decoded, decoded
once), a click or the menu opening the viewer, and the viewer's Save image…."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QSize, Qt
from PySide6.QtGui import QColor
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QMenu, QStyleOptionViewItem

from app.core.attachments import AttachedImage
from app.core.conversation import Message, MessageState, Role
from app.ui.messages import message_images
from app.ui.messages.image_viewer import ImageViewer, suggested_name
from app.ui.messages.message_images import MAX_HEIGHT, MAX_WIDTH, thumb_size
from app.ui.state.message_model import MessageListModel
from app.ui.messages.message_view import MessageView
from tests.helpers.vision_controller import png_image
from tests.ui.conftest import run, until

WIDE = AttachedImage("Harbour at dusk.png", "image/png", 1536, 1024, png_image(1536, 1024), "Scaled down from 4032 x 2688.")
TALL = AttachedImage("receipt.jpg", "image/png", 300, 900, png_image(300, 900, "#2e7d32"))


@pytest.fixture
def chat(qtbot):
    model = MessageListModel()
    model.reset_to([Message(1, 1, Role.USER, "What is in these?", 0.0, MessageState.COMPLETE, None, images=(WIDE, TALL)),
                    Message(2, 1, Role.ASSISTANT, "A harbour and a receipt.", 0.0, MessageState.COMPLETE, None)])
    view = MessageView()
    view.setModel(model)
    view.resize(900, 700)
    qtbot.addWidget(view)
    view.show()
    qtbot.waitExposed(view)
    QTest.qWait(20)
    return view


def test_a_thumbnail_keeps_the_images_shape_inside_its_box_and_is_never_enlarged() -> None:
    assert thumb_size(WIDE, 700) == QSize(MAX_WIDTH, 160)
    assert thumb_size(TALL, 700) == QSize(60, MAX_HEIGHT)
    assert thumb_size(AttachedImage("dot.png", "image/png", 16, 12, b""), 700) == QSize(16, 12)
    assert thumb_size(WIDE, 120) == QSize(120, 80)  # a narrow column


def test_a_users_images_are_thumbnails_under_the_bubble_drawn_from_their_pixels(chat) -> None:
    delegate = chat.delegate
    user = chat.model().index(0, 0)
    layout = delegate.layout(user)
    places = delegate.documents.images.places(delegate.message(user), layout.documents)
    assert [rect.size() for rect in places] == [QSize(240, 160), QSize(60, 180)]
    assert places[-1].right() == layout.column.right()  # at the right, as the bubble is
    assert places[0].top() > layout.bubble.bottom() and layout.actions.top() > max(r.bottom() for r in places)
    assert chat.visualRect(user).height() >= layout.actions.bottom() - chat.visualRect(user).top()
    shot = chat.viewport().grab().toImage()
    ratio = shot.devicePixelRatio()
    centre = places[0].center()
    # The image's disc (yellow) at its centre, its blue at a corner inside the rounding.
    assert shot.pixelColor(int(centre.x() * ratio), int(centre.y() * ratio)) == QColor("#f5c542")
    corner = places[0].topLeft() + QPoint(20, 20)
    assert shot.pixelColor(int(corner.x() * ratio), int(corner.y() * ratio)) == QColor("#3a7bd5")
    heard = chat.model().data(user, Qt.ItemDataRole.AccessibleTextRole)
    assert heard.endswith("(attached: Harbour at dusk.png, receipt.jpg)")


def test_a_rows_height_is_known_before_its_images_are_decoded_and_each_is_decoded_once(chat, monkeypatch) -> None:
    delegate = chat.delegate
    user = chat.model().index(0, 0)
    decoded: list[int] = []
    plain = message_images.scaled_pixmap
    monkeypatch.setattr(message_images, "scaled_pixmap", lambda *args: decoded.append(1) or plain(*args))
    delegate.documents.images._pixmaps.clear()
    height = delegate.sizeHint(QStyleOptionViewItem(), user).height()
    assert decoded == []  # sized from the check's width and height, not the pixels
    for _ in range(3):
        chat.viewport().repaint()
    assert len(decoded) == 2  # one per image, then kept
    assert delegate.sizeHint(QStyleOptionViewItem(), user).height() == height  # painting moved nothing


@pytest.mark.qt_log_ignore("This plugin does not support grabbing the keyboard",  # a popup, offscreen
                           r"This plugin does not support raise\(\)")
def test_a_click_on_a_thumbnail_or_its_menu_entry_chooses_the_image(chat) -> None:
    delegate = chat.delegate
    user = chat.model().index(0, 0)
    places = delegate.documents.images.places(delegate.message(user), delegate.layout(user).documents)
    chosen: list[AttachedImage] = []
    chat.imageChosen.connect(chosen.append)
    QTest.mouseMove(chat.viewport(), places[1].center())
    assert chat.viewport().cursor().shape() == Qt.CursorShape.PointingHandCursor  # it can be clicked
    QTest.mouseClick(chat.viewport(), Qt.MouseButton.LeftButton, pos=places[1].center())
    assert chosen == [TALL]
    assert delegate.image_at(user, QPoint(places[0].left() - 5, places[0].center().y())) is None
    chat._context_menu(places[0].center())  # the menu key's way to them: View image …
    menu = chat.findChildren(QMenu)[-1]
    entries = [action for action in menu.actions() if action.text().startswith("View image")]
    assert [action.text() for action in entries] == ["View image Harbour at dusk.png…", "View image receipt.jpg…"]
    entries[0].trigger()
    menu.close()
    assert chosen == [TALL, WIDE]


def test_the_viewer_shows_the_image_its_facts_and_saves_its_bytes(qtbot, loop, tmp_path) -> None:
    asked: list[tuple[str, str]] = []
    target = tmp_path / "saved"

    def ask(_parent, _caption, suggested, file_filter):
        asked.append((suggested, file_filter))
        return str(target)  # typed without a suffix: the image's is added

    viewer = ImageViewer(WIDE, loop.create_task, ask_save=ask)
    qtbot.addWidget(viewer)
    viewer.show()
    assert viewer.name.text() == "Harbour at dusk.png"
    assert viewer.facts.text().startswith("1536 x 1024 pixels · PNG · ") and "Scaled down from 4032 x 2688." in \
        viewer.facts.text()
    viewer.save_button.click()
    run(loop, until(lambda: viewer.status.isVisibleTo(viewer), 10, "the file written"))
    assert asked[0][0].endswith("Harbour at dusk.png") and asked[0][1] == "PNG image (*.png)"
    assert (tmp_path / "saved.png").read_bytes() == WIDE.data
    assert viewer.status.text() == f"Saved to {tmp_path / 'saved.png'}"
    target = tmp_path / "no such folder" / "x.png"
    viewer.save_button.click()
    run(loop, until(lambda: "could not be saved" in viewer.status.text(), 10, "the refusal"))
    assert viewer.status.text().endswith("Choose another folder.") and "Traceback" not in viewer.status.text()


def test_a_big_image_is_fitted_to_the_screen_and_the_suggested_name_has_its_real_suffix(qtbot, loop) -> None:
    viewer = ImageViewer(WIDE, loop.create_task)
    qtbot.addWidget(viewer)
    room = viewer.screen().availableGeometry().size()
    shown = viewer.picture.pixmap().deviceIndependentSize()
    assert shown.width() <= room.width() and shown.height() <= room.height()
    assert shown.width() >= min(1536, room.width() - 100) or shown.height() >= min(1024, room.height() - 250)
    small = ImageViewer(AttachedImage("icon.png", "image/png", 200, 150, png_image(200, 150)), loop.create_task)
    qtbot.addWidget(small)
    assert small.picture.pixmap().deviceIndependentSize().toSize() == QSize(200, 150)  # never enlarged
    assert abs(shown.width() / shown.height() - 1.5) < 0.01
    assert suggested_name(AttachedImage("scan.webp", "image/png", 1, 1, b"")) == "scan.png"
    assert suggested_name(AttachedImage("Pasted image", "image/jpeg", 1, 1, b"")) == "Pasted image.jpg"
    assert suggested_name(AttachedImage('a:b/c?.png', "image/png", 1, 1, b"")) == "a b c.png"
