"""Saving and opening a file the user picks: a safe name, where the dialog opens, the Save dialog itself."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QStandardPaths
from PySide6.QtWidgets import QFileDialog, QWidget

_SUFFIX = {"markdown": ".md", "json": ".json"}
# A file name from a title stays well inside every file system's 255 bytes, in characters and in UTF-8.
_LONGEST_NAME = 80
_LONGEST_NAME_BYTES = 200

# Asks the user for a path: (parent, caption, suggested path, filter) -> chosen path or "".
SaveAsker = Callable[[QWidget, str, str, str], str]
OpenAsker = Callable[[QWidget, str, str, str], str]


def file_name_for(title: str, fmt: str) -> str:
    """A file name from a chat's title: no characters Windows or macOS refuse, not too long."""
    name = re.sub(r'[<>:"/\\|?*\x00-\x1f]+', " ", title).strip(" .") or "Chat"
    name = re.sub(r"\s+", " ", name)
    if len(name) > _LONGEST_NAME or len(name.encode("utf-8")) > _LONGEST_NAME_BYTES:
        # Cut at a word where one is near, and say it was cut: "80 characters mid-word" read as a typo.
        cut = name[:_LONGEST_NAME]
        while len(cut.encode("utf-8")) > _LONGEST_NAME_BYTES:
            cut = cut[:-1]
        name = (cut.rsplit(" ", 1)[0] if " " in cut[20:] else cut).rstrip(" .") + "…"
    return name + _SUFFIX[fmt]


def documents_folder(make: bool = True) -> str:
    """Where exports go first: the user's Documents folder (made, when `make`, if the system
    names one that is not there yet, as on a fresh account), else the home folder; never the
    working folder, where a file dialog given a missing folder opens."""
    documents = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
    if documents:
        try:
            if make:
                Path(documents).mkdir(parents=True, exist_ok=True)
            if Path(documents).is_dir():
                return documents
        except OSError:
            pass
    return str(Path.home())


def save_dialog(parent: QWidget, caption: str, suggested: str, file_filter: str) -> QFileDialog:
    """The Save dialog: it adds the suggested name's suffix to a name typed without one
    before it asks whether to replace a file that is there (the OS dialog's own question),
    so the file it asked about is the file written."""
    dialog = QFileDialog(parent, caption, str(Path(suggested).parent), file_filter)
    dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
    dialog.setFileMode(QFileDialog.FileMode.AnyFile)
    dialog.setDefaultSuffix(Path(suggested).suffix.lstrip("."))
    dialog.selectFile(Path(suggested).name)
    return dialog


def ask_save(parent: QWidget, caption: str, suggested: str, file_filter: str) -> str:
    dialog = save_dialog(parent, caption, suggested, file_filter)
    try:
        return dialog.selectedFiles()[0] if dialog.exec() and dialog.selectedFiles() else ""
    finally:
        dialog.deleteLater()


def ask_open(parent: QWidget, caption: str, folder: str, file_filter: str) -> str:
    return QFileDialog.getOpenFileName(parent, caption, folder, file_filter)[0]
