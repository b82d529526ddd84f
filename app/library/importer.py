"""Bring a model the user picked (a GGUF file or an ONNX folder) into the models folder, checked."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from app.library.copying import Cancelled, CopyCancelled, Progress, copy_hashed
from app.library.model_files.gguf_info import read_gguf_info
from app.library.model_files.model_format import check_not_text, read_onnx_folder
from app.library.installed import InstalledModel
from app.library.models import ModelLibrary, safe_id
from app.library.scan import examine, split_part


class ImportCancelled(Exception):
    """The user cancelled the import; nothing was left behind."""


class ImportFailed(Exception):
    """The copy failed (disk full, unreadable); the message says what to do."""


def import_model_file(library: ModelLibrary, source: Path,
                      progress: Progress | None = None,
                      cancelled: Cancelled | None = None) -> InstalledModel:
    """Check the header (ModelFileError if unusable), copy, hash, then register.

    A split GGUF (any of its parts named) is copied whole, every part. Each copy lands as
    `<name>.partial` and is renamed only when all are complete, so a cut-off import never
    looks like a model.
    """
    check_not_text(source)  # a page or pointer saved as x.gguf is told what it is
    read_gguf_info(source)  # its messages name the file the user chose
    found = examine(source)
    parts = found.files or (found.path,)
    existing = library.get(safe_id(_stem(found.path)))
    if existing is not None and existing.size == found.size:
        return existing
    model_id = library.unused_id(_stem(found.path))
    folder = library.folder_for(model_id)
    # The vision projector beside the model comes with it, into the model's own folder.
    projector = found.projector
    total = found.size + (projector.stat().st_size if projector is not None else 0)
    _check_space(folder, source.name, total)
    digest, done = None, 0
    for part in (*parts, *((projector,) if projector is not None else ())):
        report = (lambda d, t, before=done: progress(before + d, total)) if progress else None
        copied = _copy(part, folder / (part.name + ".partial"), report, cancelled)
        digest = copied if part != projector and digest is None else digest
        done += part.stat().st_size
    for part in (*parts, *((projector,) if projector is not None else ())):
        os.replace(folder / (part.name + ".partial"), folder / part.name)
    files = tuple(folder / part.name for part in found.files)
    return library.register(model_id, folder / found.path.name, title=found.title,
                            sha256=None if files else digest, source=f"imported from {source}",
                            format=found.format, files=files,
                            projector=folder / projector.name if projector is not None else None)


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
    model_id = library.unused_id(source.name)
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
                            sha256=None, source=f"imported from {source}", format="onnx")


def _check_space(folder: Path, name: str, needed: int) -> None:
    free = shutil.disk_usage(folder).free
    if free < needed:
        shutil.rmtree(folder, ignore_errors=True)
        raise ImportFailed(f"Not enough free disk space for {name}: it needs "
                           f"{needed / 1024**3:.1f} GB and {free / 1024**3:.1f} GB is free "
                           f"in {folder.parent}. Free some space and try again.")


def _stem(first: Path) -> str:
    """The name a model gets from its file: a split GGUF's without "-00001-of-0000N"."""
    part = split_part(first)
    return part[0] if part else first.stem


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
