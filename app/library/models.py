"""The models folder: one folder per model with a model.json, the model copied in beside it or kept where the user has it."""

from __future__ import annotations

import builtins
import json
import os
import re
import shutil
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from app.core.files import try_hold_lock, write_atomically
from app.library.installed import InstalledModel
from app.library.model_defaults import ModelDefaults
from app.library.model_files.model_format import ModelFormat
from app.library.model_json import read_own, read_reference, size_on_disk as size_on_disk
from app.library.recommended_sampling import with_recommended
from app.library.model_files.model_purpose import ModelPurpose, purpose_at
from app.library.forgotten import ForgottenFiles
from app.library.projector import checked_projector
from app.library.scan import FolderScan, Found, ScanProgress, examine, scan_folder

METADATA_FILE = "model.json"
FOUND_SOURCE = "found in the models folder"


@dataclass(frozen=True)
class RemovedModel:
    """What removing a model gave back: the bytes freed, and the names of files found in its
    folder that Kestrel did not write, which were left there (and the folder with them).
    A referenced model frees nothing: only Kestrel's record of it goes."""

    model: InstalledModel
    freed: int
    left: tuple[str, ...]


@dataclass(frozen=True)
class DiskUse:
    """Bytes on disk: what each model takes in Kestrel's models folder (0 for a referenced
    one) and, apart, what referenced models take where the user keeps them."""

    in_folder: Mapping[str, int] = field(default_factory=dict)
    referenced: Mapping[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.in_folder.values())

    @property
    def referenced_total(self) -> int:
        return sum(self.referenced.values())


class ModelLibrary:
    """Reads and writes the models folder; nothing here loads a model."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def folder_for(self, model_id: str) -> Path:
        folder = self.root / safe_id(model_id)
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def list(self) -> list[InstalledModel]:
        """Models whose file is complete, and referenced ones that are missing now (flagged),
        oldest first; a model file put in the models folder by hand is added first."""
        recorded = self._recorded()
        adopted = self._adopt_dropped(recorded)
        return sorted(adopted or recorded, key=lambda m: m.added)

    def get(self, model_id: str) -> InstalledModel | None:
        folder = self.root / safe_id(model_id)
        return self._read(folder) if folder.is_dir() else None

    def find(self, path_or_id: str) -> InstalledModel | None:
        """A model by its id, or by the path of its file (or of any part of a split one)."""
        by_id = self.get(path_or_id) if safe_id(path_or_id) == path_or_id else None
        if by_id is not None:
            return by_id
        try:
            wanted = Path(path_or_id).resolve()
        except (OSError, RuntimeError):  # a loop of links (RuntimeError before Python 3.13)
            return None  # no installed model; loading the path says what is wrong with it
        return _by_path(self.list()).get(wanted)

    def default(self, chosen_id: str | None) -> InstalledModel | None:
        """The model loaded when none is named: the one the user chose last, else the oldest;
        never one that is missing now, and never one that cannot chat (an embedding model)."""
        if chosen_id:
            found = self.find(chosen_id)
            if found is not None and not found.missing and found.chats:
                return found
        return next((m for m in self.list() if not m.missing and m.chats), None)

    def chat_models(self) -> builtins.list[InstalledModel]:
        """The models that can chat, oldest first: what a chat's model picker offers."""
        return [m for m in self.list() if m.chats]

    def embedding_models(self) -> builtins.list[InstalledModel]:
        """The embedding models, oldest first: what document search can use."""
        return [m for m in self.list() if m.purpose is ModelPurpose.EMBEDDING]

    def embedding_model(self, chosen: str | None) -> InstalledModel | None:
        """The embedding model document search uses (the window's and the CLI's one rule): the
        one `chosen` names (settings.embedding_model) if it is an embedding model that is there,
        else None; with none chosen, the oldest embedding model installed that is there."""
        if chosen:
            found = self.find(chosen)
            usable = found is not None and found.purpose is ModelPurpose.EMBEDDING and not found.missing
            return found if usable else None
        return next((m for m in self.embedding_models() if not m.missing), None)

    def remove(self, model: InstalledModel) -> RemovedModel:
        """Delete a model from the models folder: its file(s) or ONNX folder, a cut-off copy
        of it, then its model.json. A referenced model is only forgotten: its file stays.

        Only what Kestrel writes there goes: a file someone put in the model's folder by
        hand stays, and the folder with it. The model goes first and model.json last, so a
        model file in use (Windows refuses to delete it) leaves the model listed as it was.
        OSError if the disk refuses.
        """
        folder = self.root / model.id
        if model.referenced:
            return self._forget(model, folder)
        if any(part.parent != folder for part in (model.path, *model.files)):
            raise ValueError(f"{model.path} is not in the folder of model {model.id}")
        leftovers = [*folder.glob("*.partial"), *folder.glob(f".{METADATA_FILE}.*.tmp")]
        projector = [p for p in (model.projector, model.missing_projector) if p is not None and p.parent == folder]
        ours = [*(model.files or (model.path,)), *projector, *leftovers, folder / METADATA_FILE]
        freed = sum(_bytes_under(path) for path in ours)
        for path in ours:
            _delete(path)
        return RemovedModel(model, freed, _drop_if_empty(folder))

    def register(self, model_id: str, path: Path, *, title: str, sha256: str | None, source: str,
                 format: ModelFormat, files: tuple[Path, ...] = (),
                 projector: Path | None = None) -> InstalledModel:
        """Record a model file (or ONNX folder, or a split GGUF's parts) already in its folder,
        with the vision projector beside it that goes with it (None: text only)."""
        return self._record(model_id, path, title, sha256, source, format, files, referenced=False,
                            projector=projector)

    def _record(self, model_id: str, path: Path, title: str, sha256: str | None, source: str,
                format: ModelFormat, files: tuple[Path, ...], *, referenced: bool,
                projector: Path | None = None) -> InstalledModel:
        """Write model.json: for a referenced model, the absolute path where the user keeps it."""
        folder = self.folder_for(model_id)
        size = sum(size_on_disk(part) for part in (files or (path,)))
        model = InstalledModel(folder.name, title, path, size, sha256, source, time.time(), format,
                               referenced=referenced, files=files, purpose=purpose_at(path, format),
                               projector=projector, defaults=with_recommended(ModelDefaults(), sha256))
        self._write(folder, model.to_json())
        return model

    def add_reference(self, path: Path, source: str | None = None) -> InstalledModel:
        """Add a GGUF file (any part of a split one) or an ONNX GenAI folder where it is; it is
        never moved, renamed or deleted. The model already added if it is in the library.
        ModelFileError says why path is not a model."""
        found = examine(Path(os.path.abspath(path)))
        known = self.find(str(found.path))
        if known is not None:
            return known
        return self._reference(found, source or f"referenced at {found.path}")

    def add_folder(self, folder: Path, progress: ScanProgress | None = None,
                   cancelled: Callable[[], bool] | None = None) -> FolderScan:
        """Reference every model in folder and the folders below it, left where they are.

        ScanCancelled (nothing added) if cancelled() turns true while looking.
        """
        folder = Path(os.path.abspath(folder))
        by_path = _by_path(self.list())
        scan = scan_folder(folder, known=by_path, progress=progress, cancelled=cancelled)
        added: builtins.list[InstalledModel] = []
        known = {by_path[path.resolve()].id: by_path[path.resolve()] for path in scan.known}
        for found in scan.found:
            twice = by_path.get(found.path.resolve())  # the same file reached by two links
            if twice is not None:
                known[twice.id] = twice
                continue
            model = self._reference(found, f"found in {folder}")
            by_path.update({part.resolve(): model for part in (model.path, *model.files)})
            added.append(model)
        return FolderScan(tuple(added), tuple(known.values()), tuple(scan.skipped))

    def set_defaults(self, model_id: str, defaults: ModelDefaults) -> InstalledModel:
        """Keep a model's own defaults in its model.json (ValueError naming a bad one;
        LookupError if there is no such model). They stay while a referenced file is missing."""
        checked = defaults.validated()
        folder = self.root / safe_id(model_id)
        if self._read(folder) is None:
            raise LookupError(f'No installed model has the id "{model_id}".')
        data = json.loads((folder / METADATA_FILE).read_text(encoding="utf-8"))
        data["defaults"] = checked.to_dict()  # other keys, a newer Kestrel's too, stay as they are
        self._write(folder, data)
        model = self._read(folder)
        if model is None:
            raise LookupError(f'The model "{model_id}" went away while its settings were saved.')
        return model

    def set_projector(self, model_id: str, projector: Path | None) -> InstalledModel:
        """Pair a model with a vision projector by hand, or unpair it (None): kept in model.json.

        LookupError if there is no such model; ValueError in words when the file is not a
        projector, does not fit the model, or (for a model in Kestrel's folder) is not in
        the model's own folder, where removing the model removes it too.
        """
        folder = self.root / safe_id(model_id)
        model = self._read(folder)
        if model is None:
            raise LookupError(f'No installed model has the id "{model_id}".')
        data = json.loads((folder / METADATA_FILE).read_text(encoding="utf-8"))
        if projector is None:
            data.pop("projector", None)
        else:
            checked = checked_projector(model, Path(os.path.abspath(projector)))
            data["projector"] = str(checked) if model.referenced else checked.name
        self._write(folder, data)
        paired = self._read(folder)
        if paired is None:
            raise LookupError(f'The model "{model_id}" went away while its projector was saved.')
        return paired

    def disk_use(self) -> DiskUse:
        """Bytes per model in Kestrel's folder, and referenced models' (present ones) apart."""
        models = self.list()
        return DiskUse({m.id: 0 if m.referenced else m.size + _projector_bytes(m) for m in models},
                       {m.id: m.size for m in models if m.referenced and not m.missing})

    # --- reading and writing model.json ------------------------------------------------

    def _recorded(self) -> builtins.list[InstalledModel]:
        if not self.root.is_dir():
            return []
        found = (self._read(folder) for folder in sorted(self.root.iterdir())
                 if not folder.name.startswith(".") and folder.is_dir())
        return [m for m in found if m is not None]

    def _read(self, folder: Path) -> InstalledModel | None:
        """The model a folder records; None for no model.json, a damaged one, or a copy
        whose file is not all there (a crash mid-import)."""
        try:
            data = json.loads((folder / METADATA_FILE).read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                return None
            if data.get("referenced") is True:
                return read_reference(folder, data)
            return read_own(folder, data)
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            return None

    def _write(self, folder: Path, data: Mapping[str, Any]) -> None:
        text = json.dumps(data, indent=2, ensure_ascii=False)
        write_atomically(folder / METADATA_FILE, text.encode("utf-8"))

    def _reference(self, found: Found, source: str) -> InstalledModel:
        ForgottenFiles(self.root).drop(found.path)  # added again on purpose: list it again
        model_id = self.unused_id(found.path.stem if found.format == "gguf" else found.path.name)
        return self._record(model_id, found.path, found.title, None, source, found.format, found.files,
                            referenced=True, projector=found.projector)

    def unused_id(self, stem: str) -> str:
        """A folder of its own for a new model: removing it then touches no other model."""
        base = safe_id(re.sub(r"-00001-of-\d{5}$", "", stem))
        candidate, number = base, 1
        while (self.root / candidate).exists():
            number += 1
            candidate = f"{base}-{number}"
        return candidate

    # --- files put in the models folder by hand ----------------------------------------

    def _adopt_dropped(self, recorded: builtins.list[InstalledModel]) -> builtins.list[InstalledModel]:
        """Reference .gguf files and ONNX folders put straight into the models folder; the
        models then, or [] if there were none. Only the top level is looked at: Kestrel's
        own copies sit one folder down, beside their model.json."""
        if not self.root.is_dir():
            return []
        skip = [*_by_path(recorded), *ForgottenFiles(self.root).paths()]
        if not scan_folder(self.root, known=skip, recursive=False).found:
            return []
        held = try_hold_lock(self.root / ".library.lock")
        if held is None:
            return []  # another Kestrel is adding them now; the next list shows them
        try:
            recorded = self._recorded()  # as it is now that no one else writes
            skip = [*_by_path(recorded), *ForgottenFiles(self.root).paths()]
            found = scan_folder(self.root, known=skip, recursive=False).found
            # A folder with a model.json is Kestrel's own (an ONNX download being recorded).
            dropped = [f for f in found if not (f.path / METADATA_FILE).exists()]
            return recorded + [self._reference(f, FOUND_SOURCE) for f in dropped]
        finally:
            held.release()

    def _forget(self, model: InstalledModel, folder: Path) -> RemovedModel:
        if model.path.parent == self.root:
            ForgottenFiles(self.root).add(model.path)
        for path in [*folder.glob(f".{METADATA_FILE}.*.tmp"), folder / METADATA_FILE]:
            path.unlink(missing_ok=True)
        return RemovedModel(model, 0, _drop_if_empty(folder))


def _projector_bytes(model: InstalledModel) -> int:
    try:
        return model.projector.stat().st_size if model.projector is not None else 0
    except OSError:
        return 0


def _by_path(models: Iterable[InstalledModel]) -> dict[Path, InstalledModel]:
    """Each model under the resolved path of its file and of each of its parts."""
    return {part.resolve(): model for model in models for part in (model.path, *model.files)}


def _drop_if_empty(folder: Path) -> tuple[str, ...]:
    """The names left in a model's folder (files Kestrel did not write); it goes if none."""
    if not folder.is_dir():
        return ()
    left = tuple(sorted(child.name for child in folder.iterdir()))
    if not left:
        folder.rmdir()
    return left


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
