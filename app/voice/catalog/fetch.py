"""Download a catalog speech model or voice into Kestrel's speech folder, and remove one.

The files wait as parts in `<speech>/<folder>.download/` (resumable: a later fetch of the same unit goes on from
them), each is checked by its size and SHA-256 as the catalog states them, the folder's content is read (a
Whisper model's config.json, a voice's .onnx.json) and only then is the folder renamed to the name the model
is looked for by (`<speech>/<model id>/`, `<speech>/voice-<voice id>/`): a model is either whole there or absent.
Nothing here opens a socket until fetch_speech is called.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from app.core.files import try_hold_lock
from app.library.download import DownloadControl, DownloadedFile, DownloadOptions, ProgressCallback, UnitDownload
from app.library.download.transport import Steps
from app.library.download.unit import FileSpec
from app.library.huggingface.hub import DownloadUnit, resolve_url
from app.voice.catalog.entries import SpeechEntry, SpeechKind, as_speech_model, as_voice
from app.voice.speech_models import installed_folder
from app.voice.synthesis.voices import voice_folder, voice_in_place

# What a DownloadUnit of a speech model is called by (its format), so the download list sends it here.
SPEECH_FORMAT: Final = "speech"
_PARTS = ".download"


class SpeechFetchRefused(Exception):
    """The speech model was not put in place: another Kestrel is downloading it, or what arrived is not what it
    should be (deleted). message says so in words."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class SpeechFetched:
    """The speech model's folder, and the files as checked (none when it was there already)."""

    id: str
    folder: Path
    files: tuple[DownloadedFile, ...]
    already_installed: bool = False

    @property
    def size(self) -> int:
        return sum(path.stat().st_size for path in self.folder.iterdir() if path.is_file())


def target_folder(entry: SpeechEntry, speech_folder: Path) -> Path:
    """Where the entry's files are looked for once downloaded."""
    if entry.kind is SpeechKind.VOICE:
        return voice_folder(as_voice(entry), speech_folder)
    return speech_folder / entry.id


def is_downloaded(entry: SpeechEntry, speech_folder: Path) -> bool:
    if entry.kind is SpeechKind.VOICE:
        return voice_in_place(as_voice(entry), speech_folder)
    return installed_folder(as_speech_model(entry), speech_folder) is not None


def speech_unit(entry: SpeechEntry, endpoint: str | None = None) -> DownloadUnit:
    """The entry as a download: its files at the pinned commit, each with the catalog's size and SHA-256.
    key: the name of the folder it goes to (the unit's format tells the download list it is speech)."""
    files = tuple(FileSpec(resolve_url(entry.repo, file.path, entry.revision, endpoint),
                           file.path.rsplit("/", 1)[-1], file.sha256, file.size) for file in entry.files)
    key = target_folder(entry, Path()).name
    return DownloadUnit(key, entry.name, SPEECH_FORMAT, files, f"{entry.repo}@{entry.revision}", entry.id)


def fetch_speech(speech_folder: Path, unit: DownloadUnit, *, control: DownloadControl | None = None,
                 progress: ProgressCallback | None = None, options: DownloadOptions = DownloadOptions(),
                 steps: Steps | None = None) -> SpeechFetched:
    """Download (or finish downloading) the unit into the speech folder. Blocks: call it on a worker thread.
    Raises DownloadError, DownloadStopped (parts kept after control.stop(), deleted after cancel()) or
    SpeechFetchRefused."""
    target = speech_folder / unit.key
    catalog_id = unit.catalog_id or unit.key
    if _whole(target, unit):
        return SpeechFetched(catalog_id, target, (), already_installed=True)
    parts = speech_folder / f"{unit.key}{_PARTS}"
    parts.mkdir(parents=True, exist_ok=True)
    held = try_hold_lock(speech_folder / f".{unit.key}.download.lock")
    if held is None:
        raise SpeechFetchRefused(f"Another Kestrel is already downloading {unit.title}. Let it finish (or stop "
                                 "it), then try again.")
    try:
        files = tuple(UnitDownload(list(unit.files), parts, control, progress, options, steps).run())
        problem = _content_problem(parts, unit)
        if problem is not None:
            shutil.rmtree(parts, ignore_errors=True)
            raise SpeechFetchRefused(f"{unit.title} arrived, but {problem}; the download was deleted. The "
                                     "catalog entry may be wrong: please report it.")
        shutil.rmtree(target, ignore_errors=True)  # a folder left incomplete by hand: replaced whole
        os.replace(parts, target)
        return SpeechFetched(catalog_id, target, files)
    finally:
        held.release()


def discard_speech(speech_folder: Path, unit: DownloadUnit) -> None:
    """Delete what an unfinished download of the unit left."""
    shutil.rmtree(speech_folder / f"{unit.key}{_PARTS}", ignore_errors=True)


def speech_parts_size(speech_folder: Path, unit: DownloadUnit) -> int:
    """The bytes an unfinished download of the unit has kept."""
    parts = speech_folder / f"{unit.key}{_PARTS}"
    if not parts.is_dir() or parts.is_symlink():
        return 0
    return sum(path.lstat().st_size for path in parts.iterdir() if path.is_file() and not path.is_symlink())


def remove_speech(entry: SpeechEntry, speech_folder: Path) -> None:
    """Delete a downloaded speech model or voice (OSError when the disk refuses)."""
    folder = target_folder(entry, speech_folder)
    if folder.is_symlink():
        folder.unlink()
    elif folder.exists():
        shutil.rmtree(folder)


def _whole(folder: Path, unit: DownloadUnit) -> bool:
    return all((folder / spec.name).is_file() and (folder / spec.name).stat().st_size == spec.size
               for spec in unit.files)


def _content_problem(folder: Path, unit: DownloadUnit) -> str | None:
    """What is wrong with the checked files as a model, or None: a voice's .onnx.json must read as Piper's config
    (its sample rate and phoneme ids), a Whisper model's config.json as a JSON object."""
    names = [spec.name for spec in unit.files]
    config = next((name for name in names if name.endswith(".onnx.json")), None)
    try:
        if config is not None:
            data = json.loads((folder / config).read_text(encoding="utf-8"))
            rate = data.get("audio", {}).get("sample_rate") if isinstance(data, dict) else None
            if not isinstance(rate, int) or not isinstance(data.get("phoneme_id_map"), dict):
                return f"its {config} is not a Piper voice's configuration"
        elif "config.json" in names:
            if not isinstance(json.loads((folder / "config.json").read_text(encoding="utf-8")), dict):
                return "its config.json is not a Whisper model's configuration"
    except (OSError, ValueError, AttributeError) as exc:
        return f"its configuration could not be read ({exc})"
    return None
