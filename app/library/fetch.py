"""Download a unit straight into the library: its parts wait in the model's own folder,
are checked, renamed into place, read as a model, and only then registered."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from app.core.files import try_hold_lock, write_atomically
from app.library.download import (DownloadControl, DownloadedFile, DownloadOptions,
                                  ProgressCallback, UnitDownload)
from app.library.download.nofollow import Found, look_at
from app.library.download.part import PartFile, open_for_append
from app.library.download.transport import Steps
from app.library.model_files.gguf_info import ModelFileError, read_gguf_info
from app.library.huggingface.hub import DownloadUnit
from app.library.model_files.model_format import read_onnx_folder
from app.library.installed import InstalledModel
from app.library.models import METADATA_FILE, ModelLibrary, safe_id
from app.library.projector import fits, read_projector

# Beside the parts of an unfinished download: which addresses they are from, so the same
# unit finds its folder (and its parts) again after a restart. The library lists a folder
# only once model.json is in it, which register() writes last.
MARKER = ".download.json"
LOCK = ".download.lock"
MARKER_VERSION = 1


class FetchRefused(Exception):
    """The unit was not added: another Kestrel is fetching it ("busy"), or what arrived is
    not a model ("not_a_model", deleted). str() says so in words."""

    def __init__(self, kind: Literal["busy", "not_a_model"], message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class Fetched:
    """The model in the library, the files as checked (empty when it was installed already)."""

    model: InstalledModel
    files: tuple[DownloadedFile, ...]
    already_installed: bool = False


def source_of(unit: DownloadUnit) -> str:
    return f"downloaded from {unit.source}"


def installed_from(library: ModelLibrary, unit: DownloadUnit) -> InstalledModel | None:
    """The model an earlier fetch of this unit installed, if it is still there."""
    return next((m for m in library.list() if m.source == source_of(unit)), None)


def fetch_unit(library: ModelLibrary, unit: DownloadUnit, *, control: DownloadControl | None = None,
               progress: ProgressCallback | None = None,
               options: DownloadOptions = DownloadOptions(), steps: Steps | None = None) -> Fetched:
    """Download (or finish downloading) the unit into the library and register it.

    steps hears what it does before the bytes flow (UnitDownload). Blocks: call it on a worker thread. Raises DownloadError, DownloadStopped (the parts
    are kept after control.stop(), deleted after control.cancel()) or FetchRefused.
    """
    if unit.format == "speech":  # a speech model is no library model: app/voice/catalog/fetch.py fetches it
        raise ValueError(f"{unit.title} is a speech model, which the models library does not hold")
    existing = installed_from(library, unit)
    if existing is not None:
        return Fetched(existing, (), already_installed=True)
    folder = unit_folder(library, unit, claim=True)
    assert folder is not None
    lock = folder / LOCK
    held = try_hold_lock(_no_link(lock))
    if held is None:  # two writers appending to one .part would only make a damaged file
        raise FetchRefused("busy", f"Another Kestrel is already downloading {unit.title}. Let it "
                                   f"finish (or stop it), then try again.")
    try:
        specs = list(unit.files)
        files = tuple(UnitDownload(specs, folder, control, progress, options, steps).run())
        path = _checked_model(folder, unit)
        (folder / MARKER).unlink(missing_ok=True)
        # The projector is the model's companion, not one of its parts.
        model_files = [f for spec, f in zip(specs, files) if spec.name != unit.projector]
        # A split GGUF is registered with all its parts, so its size and removal count them all.
        parts = {"files": tuple(f.path for f in model_files)} \
            if unit.format == "gguf" and len(model_files) > 1 else {}
        model = library.register(folder.name, path, title=unit.title,
                                 sha256=model_files[0].sha256 if len(model_files) == 1 else None,
                                 source=source_of(unit), format=unit.format,
                                 projector=_paired_projector(folder, unit, path), **parts)
        return Fetched(model, files)
    finally:
        held.release()
        lock.unlink(missing_ok=True)
        _tidy(folder)


def discard_unit(library: ModelLibrary, unit: DownloadUnit) -> None:
    """Delete what an unfinished download of the unit left (a cancel while it was paused)."""
    folder = unit_folder(library, unit, claim=False)
    if folder is None:
        return
    held = try_hold_lock(_no_link(folder / LOCK))
    if held is None:
        raise FetchRefused("busy", f"Another Kestrel is downloading {unit.title} now; cancel it "
                                   f"there.")
    try:
        for file in unit.files:
            PartFile(file.name, folder, open_for_append).discard()
    finally:
        held.release()
        (folder / LOCK).unlink(missing_ok=True)
        _tidy(folder)


def unit_folder(library: ModelLibrary, unit: DownloadUnit, claim: bool) -> Path | None:
    """The model folder this unit downloads into: the one whose marker names the same
    addresses (an earlier try), else, when claim is True, a new one of its own."""
    base = safe_id(unit.catalog_id or unit.title)
    urls = sorted(f.url for f in unit.files)
    for number in range(1, 1000):
        folder = library.root / (base if number == 1 else f"{base}-{number}")
        if look_at(folder) is Found.NAME_ONLY:
            continue  # a link to a folder elsewhere: Kestrel writes only inside the models folder
        if _marker_urls(folder) == urls:
            return folder
        if claim and _claim(folder, unit, urls):
            return folder
    if claim:
        raise FetchRefused("busy", f"The models folder {library.root} has no free name left for "
                                   f"{unit.title}; remove some unfinished downloads.")
    return None


def _no_link(path: Path) -> Path:
    """The lock file's name, with a link or other odd thing planted there removed first: opening
    it would create (or lock) whatever the link leads to."""
    if look_at(path) is Found.NAME_ONLY:
        path.unlink()
    return path


def _claim(folder: Path, unit: DownloadUnit, urls: list[str]) -> bool:
    """Make the folder ours: a new folder is taken at once (mkdir), so two fetches never share one."""
    try:
        folder.mkdir(parents=True)
    except FileExistsError:
        return False
    marker = {"version": MARKER_VERSION, "urls": urls, "source": unit.source}
    write_atomically(folder / MARKER, json.dumps(marker, indent=2).encode("utf-8"))
    return True


def _marker_urls(folder: Path) -> list[str] | None:
    try:
        data = json.loads((folder / MARKER).read_text(encoding="utf-8"))
        urls = data["urls"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return sorted(str(u) for u in urls) if isinstance(urls, list) else None


def _checked_model(folder: Path, unit: DownloadUnit) -> Path:
    """The model's path once its header (or genai_config.json) reads; what is not a model goes."""
    top = PurePosixPath(unit.files[0].name).parts[0]
    path = folder / top
    try:
        if unit.format == "onnx":
            read_onnx_folder(path)
        else:
            read_gguf_info(path)
    except ModelFileError as exc:
        for file in unit.files:
            folder.joinpath(*PurePosixPath(file.name).parts).unlink(missing_ok=True)
        raise FetchRefused("not_a_model", f"{exc.message} The downloaded file was deleted.") from None
    return path


def _paired_projector(folder: Path, unit: DownloadUnit, model: Path) -> Path | None:
    """The projector that came with the unit, once its header says it is one that fits the
    model; else it is deleted and the model kept text only (a listing names files, and a
    file called mmproj may be for another model, or no projector at all)."""
    if unit.projector is None:
        return None
    path = folder / unit.projector
    found = read_projector(path)
    if found is not None and fits(found, read_gguf_info(model).embedding_length):
        return path
    path.unlink(missing_ok=True)
    return None


def _tidy(folder: Path) -> None:
    """Once no part is left (done, cancelled, refused), the marker and empty folders go."""
    if any(folder.rglob("*.part")):
        return
    if not (folder / METADATA_FILE).exists():
        (folder / MARKER).unlink(missing_ok=True)
    for top, _, _ in sorted(os.walk(folder), key=lambda walked: -len(walked[0])):
        try:
            Path(top).rmdir()
        except OSError:  # not empty: a model, or a file Kestrel did not write
            pass

