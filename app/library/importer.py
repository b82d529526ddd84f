"""Bring a GGUF file the user picked into the models folder, checked and verified."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable

from app.library.copying import CopyCancelled, copy_hashed
from app.library.gguf_info import read_gguf_info
from app.library.models import InstalledModel, ModelLibrary, safe_id


class ImportCancelled(Exception):
    """The user cancelled the import; nothing was left behind."""


class ImportFailed(Exception):
    """The copy failed (disk full, unreadable); the message says what to do."""


def import_model_file(library: ModelLibrary, source: Path,
                      progress: Callable[[int, int], None] | None = None,
                      cancelled: Callable[[], bool] | None = None) -> InstalledModel:
    """Check the header (ModelFileError if unusable), copy, hash, then register.

    The copy lands as `<name>.partial` and is renamed only when complete, so a cut-off
    import never looks like a model.
    """
    info = read_gguf_info(source)
    existing = library.get(source.stem)
    if existing is not None and existing.size == info.file_size:
        return existing
    model_id = _unused_id(library, source.stem)
    folder = library.folder_for(model_id)
    target = folder / source.name
    partial = target.with_name(target.name + ".partial")
    free = shutil.disk_usage(folder).free
    if free < info.file_size:
        shutil.rmtree(folder, ignore_errors=True)
        raise ImportFailed(f"Not enough free disk space for {source.name}: it needs "
                           f"{info.file_size / 1024**3:.1f} GB and {free / 1024**3:.1f} GB is free "
                           f"in {folder.parent}. Free some space and try again.")
    digest = _copy(source, partial, progress, cancelled)
    os.replace(partial, target)
    return library.register(model_id, target, title=info.name or source.stem, sha256=digest,
                            source=f"imported from {source}")


def _unused_id(library: ModelLibrary, stem: str) -> str:
    """A folder of our own: a failed import may then remove it without touching others."""
    base = safe_id(stem)
    candidate, number = base, 1
    while (library.root / candidate).exists():
        number += 1
        candidate = f"{base}-{number}"
    return candidate


def _copy(source: Path, partial: Path, progress, cancelled) -> str:
    try:
        return copy_hashed([source], partial, progress, cancelled)
    except CopyCancelled as exc:
        shutil.rmtree(partial.parent, ignore_errors=True)
        raise ImportCancelled(f"Import of {source.name} cancelled.") from exc
    except OSError as exc:
        shutil.rmtree(partial.parent, ignore_errors=True)
        raise ImportFailed(f"Could not copy {source.name} into {partial.parent.parent}: "
                           f"{exc.strerror or exc}. Check the free space and try again.") from exc
