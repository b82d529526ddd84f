"""The models folder: one folder per model, its file and a model.json beside it."""

from __future__ import annotations

import json
import re
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
            path = folder / data["path"]
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


def safe_id(model_id: str) -> str:
    """A folder name that is valid on every OS."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", model_id).strip(".-")
    return cleaned or "model"
