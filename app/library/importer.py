"""Bring a model the user picked (a GGUF file or an ONNX folder) into the models folder, checked."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from app.library.copying import Cancelled, CopyCancelled, Progress, copy_hashed
from app.library.gguf_info import read_gguf_info
from app.library.model_format import read_onnx_folder
from app.library.models import InstalledModel, ModelLibrary, safe_id


class ImportCancelled(Exception):
    """The user cancelled the import; nothing was left behind."""


class ImportFailed(Exception):
    """The copy failed (disk full, unreadable); the message says what to do."""


def import_model_file(library: ModelLibrary, source: Path,
                      progress: Progress | None = None,
                      cancelled: Cancelled | None = None) -> InstalledModel:
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
    _check_space(folder, source.name, info.file_size)
    digest = _copy(source, partial, progress, cancelled)
    os.replace(partial, target)
    return library.register(model_id, target, title=info.name or source.stem, sha256=digest,
                            source=f"imported from {source}")


def import_model_folder(library: ModelLibrary, source: Path,
                        progress: Progress | None = None,
                        cancelled: Cancelled | None = None) -> InstalledModel:
    """Check an ONNX Runtime GenAI folder (ModelFolderError if unusable), copy, register.

    It is copied into `<name>.partial/` and renamed only when every file is in.
    """
    info = read_onnx_folder(source)
    files = sorted(f for f in source.rglob("*") if f.is_file())
    total = sum(f.stat().st_size for f in files)
    existing = library.get(source.name)
    if existing is not None and existing.size == total:
        return existing
    model_id = _unused_id(library, source.name)
    folder = library.folder_for(model_id)
    partial = folder / (source.name + ".partial")
    _check_space(folder, source.name, total)
    done = 0
    for file in files:
        target = partial / file.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        report = (lambda d, t, before=done: progress(before + d, total)) if progress else None
        _copy(file, target, report, cancelled, cleanup=folder)
        done += file.stat().st_size
    final = folder / source.name
    os.replace(partial, final)
    return library.register(model_id, final, title=f"{source.name} (ONNX, {info.model_type})",
                            sha256=None, source=f"imported from {source}")


def _check_space(folder: Path, name: str, needed: int) -> None:
    free = shutil.disk_usage(folder).free
    if free < needed:
        shutil.rmtree(folder, ignore_errors=True)
        raise ImportFailed(f"Not enough free disk space for {name}: it needs "
                           f"{needed / 1024**3:.1f} GB and {free / 1024**3:.1f} GB is free "
                           f"in {folder.parent}. Free some space and try again.")


def _unused_id(library: ModelLibrary, stem: str) -> str:
    """A folder of our own: a failed import may then remove it without touching others."""
    base = safe_id(stem)
    candidate, number = base, 1
    while (library.root / candidate).exists():
        number += 1
        candidate = f"{base}-{number}"
    return candidate


def _copy(source: Path, partial: Path, progress: Progress | None, cancelled: Cancelled | None,
          cleanup: Path | None = None) -> str:
    """Copy with a checksum; on cancel or a disk error the model's folder goes."""
    cleanup = cleanup or partial.parent
    try:
        return copy_hashed([source], partial, progress, cancelled)
    except CopyCancelled as exc:
        shutil.rmtree(cleanup, ignore_errors=True)
        raise ImportCancelled(f"Import of {source.name} cancelled.") from exc
    except OSError as exc:
        shutil.rmtree(cleanup, ignore_errors=True)
        raise ImportFailed(f"Could not copy {source.name} into {cleanup.parent}: "
                           f"{exc.strerror or exc}. Check the free space and try again.") from exc
