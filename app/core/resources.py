"""Where the files Kestrel ships beside its code (resources/) are, from source and frozen."""

from __future__ import annotations

import sys
from pathlib import Path


def resources_folder() -> Path:
    """resources/: the repository's folder, or the copy a frozen build carries in _internal/.

    PyInstaller sets sys._MEIPASS to the folder it unpacked its data to; a source
    checkout (or an editable install) keeps resources/ beside the app package.
    """
    frozen = getattr(sys, "_MEIPASS", None)
    if frozen is not None:
        return Path(frozen) / "resources"
    return Path(__file__).resolve().parents[2] / "resources"


def resource_path(*parts: str) -> Path:
    """A file under resources/, e.g. resource_path("icons", "kestrel-256.png")."""
    return resources_folder().joinpath(*parts)
