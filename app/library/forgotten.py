"""The models put into the models folder by hand that the user removed from the list."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.core.files import write_atomically

FORGOTTEN_FILE = ".forgotten.json"


class ForgottenFiles:
    """Files put into the models folder by hand that the user then removed: Kestrel may not
    delete them (it did not write them), so it remembers, in .forgotten.json, not to list
    them again. Each is remembered with its size and time of change, so a new file put
    there under the same name does show up.

    Forgetting rather than refusing to remove: the user asked for the model to go from the
    list, and a model that cannot be removed from Kestrel would stay in every list until
    the user found the file and deleted it."""

    def __init__(self, root: Path) -> None:
        self.file = root / FORGOTTEN_FILE

    def paths(self) -> list[Path]:
        return [Path(entry["path"]) for entry in self._entries() if _stamp(Path(entry["path"])) == entry]

    def add(self, path: Path) -> None:
        stamp = _stamp(path)
        if stamp is not None:
            self._save([*self._others(path), stamp])

    def drop(self, path: Path) -> None:
        entries = self._entries()
        if any(entry["path"] == str(path) for entry in entries):
            self._save(self._others(path))

    def _others(self, path: Path) -> list[dict[str, Any]]:
        return [entry for entry in self._entries() if entry["path"] != str(path)]

    def _entries(self) -> list[dict[str, Any]]:
        try:
            data = json.loads(self.file.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return []
        entries = data.get("forgotten") if isinstance(data, dict) else None
        return [e for e in entries or () if isinstance(e, dict) and isinstance(e.get("path"), str)]

    def _save(self, entries: list[dict[str, Any]]) -> None:
        text = json.dumps({"version": 1, "forgotten": entries}, indent=2, ensure_ascii=False)
        write_atomically(self.file, text.encode("utf-8"))


def _stamp(path: Path) -> dict[str, Any] | None:
    try:
        status = path.stat()
    except OSError:
        return None
    return {"path": str(path), "size": status.st_size, "modified_ns": status.st_mtime_ns}
