"""An image from a message, whole (up to the screen's size), with its name, size and note, and Save image…."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QGuiApplication, QImage, QPixmap
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPushButton, QVBoxLayout, QWidget
from shiboken6 import isValid

from app.core.attachments import AttachedImage
from app.core.units import human_size
from app.ui.common.save_files import SaveAsker, ask_save, documents_folder, file_name_for
from app.ui.state.message_words import image_size_words

_SUFFIX = {"image/png": ".png", "image/jpeg": ".jpg"}
_FILTER = {"image/png": "PNG image (*.png)", "image/jpeg": "JPEG image (*.jpg *.jpeg)"}
# Room the name, facts and buttons take under the image, and the screen's edge kept free.
_BELOW = 150
_MARGIN = 80


def suggested_name(image: AttachedImage) -> str:
    """The file name Save image… offers: the image's name with the suffix of what it now is (the
    check may have made a WebP a PNG), no characters a file system refuses."""
    suffix = _SUFFIX.get(image.mime, ".png")
    stem = os.path.splitext(image.name)[0] or image.name  # the name may hold another system's separators
    return file_name_for(stem, "markdown")[: -len(".md")] + suffix


class ImageViewer(QDialog):
    """One image at up to the screen's size (never enlarged). Save image… asks where, then the
    bytes are written off the UI thread (a task `spawn` starts); `status` says where it went, or
    why it could not. `ask_save` is the file dialog (tests give their own)."""

    def __init__(self, image: AttachedImage, spawn: Callable[[Coroutine[Any, Any, None]], object],
                 parent: QWidget | None = None, ask_save: SaveAsker = ask_save) -> None:
        super().__init__(parent)
        self.setObjectName("imageViewer")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)  # a few MB of picture: not kept once closed
        self.setWindowTitle(image.name)
        self.image, self._spawn, self._ask_save = image, spawn, ask_save
        self.folder = ""
        self.picture = QLabel(self)
        self.picture.setObjectName("imagePicture")
        self.picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.picture.setAccessibleName(f"Image {image.name}")
        self.picture.setPixmap(self._fitted(QImage.fromData(image.data)))
        self.name = QLabel(image.name, self)
        self.name.setObjectName("imageName")
        self.name.setWordWrap(True)
        font = self.name.font()
        font.setBold(True)
        self.name.setFont(font)
        facts = f"{image_size_words(image)} pixels · {_SUFFIX.get(image.mime, '').lstrip('.').upper()} · " \
                f"{human_size(len(image.data))}"
        self.facts = QLabel(facts + (f"\n{image.note}" if image.note else ""), self)
        self.facts.setObjectName("imageFacts")
        self.facts.setWordWrap(True)
        self.status = QLabel(self)
        self.status.setObjectName("imageSaveStatus")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status.hide()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        self.save_button = QPushButton("Save image…", self)
        buttons.addButton(self.save_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.reject)
        self.save_button.clicked.connect(self.choose_save)
        layout = QVBoxLayout(self)
        layout.addWidget(self.picture, 1)
        for part in (self.name, self.facts, self.status, buttons):
            layout.addWidget(part)
        self.save_button.setFocus()

    def _fitted(self, decoded: QImage) -> QPixmap:
        """The image at its own size, or scaled down (its shape kept) to fit the screen it opens on."""
        if decoded.isNull():
            return QPixmap()
        screen = self.screen() or QGuiApplication.primaryScreen()
        room = screen.availableGeometry().size() - QSize(_MARGIN, _MARGIN + _BELOW) if screen is not None \
            else QSize(1024, 768)
        ratio = self.devicePixelRatioF()
        if decoded.width() <= room.width() * ratio and decoded.height() <= room.height() * ratio:
            pixmap = QPixmap.fromImage(decoded)
        else:
            pixmap = QPixmap.fromImage(decoded.scaled(room * ratio, Qt.AspectRatioMode.KeepAspectRatio,
                                                      Qt.TransformationMode.SmoothTransformation))
        pixmap.setDevicePixelRatio(ratio)
        return pixmap

    def choose_save(self) -> None:
        """Save image…: ask where (the OS dialog asks before replacing a file), then write it."""
        image = self.image
        suggested = str(Path(self.folder or documents_folder()) / suggested_name(image))
        path = self._ask_save(self, "Save image", suggested, _FILTER.get(image.mime, "Images (*.png *.jpg)"))
        if path:
            target = Path(path) if Path(path).suffix else Path(path + _SUFFIX.get(image.mime, ".png"))
            self.folder = str(target.parent)
            self._spawn(self._write(target))

    async def _write(self, target: Path) -> None:
        try:
            await asyncio.to_thread(target.write_bytes, self.image.data)
        except OSError as error:
            reason = error.strerror or str(error)
            self._say(f"The image could not be saved to {target}: {reason}. Choose another folder.")
            return
        self._say(f"Saved to {target}")

    def _say(self, words: str) -> None:
        if not isValid(self):
            return  # closed while the file was written
        self.status.setText(words)
        self.status.show()
