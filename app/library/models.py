"""The models folder: one folder per model, its file and a model.json beside it."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app.core.files import write_atomically

METADATA_FILE = "model.json"
METADATA_VERSION = 1


@dataclass(frozen=True)
class InstalledModel:
    """A model file in the library and what is known about it."""

    id: str
    title: str
    path: Path
    size: int
    sha256: str | None
    source: str
    added: float

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = self.path.name
        data["version"] = METADATA_VERSION
        return data


@dataclass(frozen=True)
class RemovedModel:
    """What removing a model gave back: the bytes freed, and the names of files found in its
    folder that Kestrel did not write, which were left there (and the folder with them)."""

    model: InstalledModel
    freed: int
    left: tuple[str, ...]


class ModelLibrary:
    """Reads and writes the models folder; nothing here loads a model."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def folder_for(self, model_id: str) -> Path:
        folder = self.root / safe_id(model_id)
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def list(self) -> list[InstalledModel]:
        """Installed models whose file is complete, oldest first."""
        if not self.root.is_dir():
            return []
        found = (self._read(folder) for folder in sorted(self.root.iterdir()) if folder.is_dir())
        return sorted((m for m in found if m is not None), key=lambda m: m.added)

    def get(self, model_id: str) -> InstalledModel | None:
        folder = self.root / safe_id(model_id)
        return self._read(folder) if folder.is_dir() else None

    def find(self, path_or_id: str) -> InstalledModel | None:
        """A model by its id, or by the path of its file."""
        by_id = self.get(path_or_id) if safe_id(path_or_id) == path_or_id else None
        if by_id is not None:
            return by_id
        try:
            wanted = Path(path_or_id).resolve()
        except (OSError, RuntimeError):  # a loop of links (RuntimeError before Python 3.13)
            return None  # no installed model; loading the path says what is wrong with it
        return next((m for m in self.list() if m.path.resolve() == wanted), None)

    def default(self, chosen_id: str | None) -> InstalledModel | None:
        """The model loaded when none is named: the one the user chose last, else the oldest."""
        if chosen_id:
            found = self.find(chosen_id)
            if found is not None:
                return found
        installed = self.list()
        return installed[0] if installed else None

    def remove(self, model: InstalledModel) -> RemovedModel:
        """Delete a model from the models folder: its file or ONNX folder, a cut-off copy
        of it, then its model.json.

        Only what Kestrel writes there goes: a file someone put in the model's folder by
        hand stays, and the folder with it. The model goes first and model.json last, so a
        model file in use (Windows refuses to delete it) leaves the model listed as it was.
        OSError if the disk refuses.
        """
        folder = self.root / model.id
        if model.path.parent != folder:
            raise ValueError(f"{model.path} is not in the folder of model {model.id}")
        leftovers = [*folder.glob("*.partial"), *folder.glob(f".{METADATA_FILE}.*.tmp")]
        ours = [model.path, *leftovers, folder / METADATA_FILE]
        freed = sum(_bytes_under(path) for path in ours)
        for path in ours:
            _delete(path)
        left = tuple(sorted(child.name for child in folder.iterdir()))
        if not left:
            folder.rmdir()
        return RemovedModel(model, freed, left)

    def register(self, model_id: str, path: Path, *, title: str, sha256: str | None,
                 source: str) -> InstalledModel:
        """Record a model file (or ONNX model folder) that is already in its folder."""
        model = InstalledModel(safe_id(model_id), title, path, size_on_disk(path),
                               sha256, source, time.time())
        text = json.dumps(model.to_json(), indent=2, ensure_ascii=False)
        write_atomically(path.parent / METADATA_FILE, text.encode("utf-8"))
        return model

    def _read(self, folder: Path) -> InstalledModel | None:
        try:
            data = json.loads((folder / METADATA_FILE).read_text(encoding="utf-8"))
            path = folder / _plain_name(data["path"])
            size = size_on_disk(path)
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            return None
        if size != data.get("size"):
            return None
        return InstalledModel(folder.name, str(data.get("title") or folder.name), path, size,
                              data.get("sha256"), str(data.get("source", "")),
                              float(data.get("added", 0.0)))


def size_on_disk(path: Path) -> int:
    """A file's size, or the sum of the files in a model folder."""
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size


def _plain_name(name: object) -> str:
    """A file name without a folder part: register() writes only such names, and one that
    leads out of the model's folder ("../x") must never be what remove() deletes."""
    if not isinstance(name, str) or name in ("", ".", "..") or Path(name).name != name:
        raise ValueError(f"not a file name: {name!r}")
    return name


def _bytes_under(path: Path) -> int:
    """The bytes a file, or a folder's files, take; deleting a link frees nothing of its target."""
    if path.is_symlink() or not path.exists():
        return 0
    if not path.is_dir():
        return path.stat().st_size
    return sum(os.lstat(os.path.join(top, name)).st_size
               for top, _, names in os.walk(path) for name in names)


def _delete(path: Path) -> None:
    """Delete a file, a link (never what it leads to) or a folder with its files."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def safe_id(model_id: str) -> str:
    """A folder name that is valid on every OS."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", model_id).strip(".-")
    return cleaned or "model"
