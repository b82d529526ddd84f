"""The model library's events and rows: downloads, the installed models, the catalog with each fit."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Mapping

from app.hardware.fit import FitEstimate
from app.hardware.speech_fit import SpeechFit
from app.library.catalog import CatalogEntry
from app.library.installed import InstalledModel


DownloadId = str


class DownloadState(StrEnum):
    """Where a download is; the view words each one (app/ui/state/download_items.py)."""

    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    VERIFYING = "verifying"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class DownloadItem:
    """One download as a view shows it; model_id is set once it is done."""

    id: DownloadId
    title: str
    state: DownloadState
    done: int = 0
    total: int | None = None
    bytes_per_second: float = 0.0
    seconds_left: float | None = None
    message: str = ""
    model_id: str | None = None
    catalog_id: str | None = None
    source: str = ""


@dataclass(frozen=True)
class DownloadChanged:
    """A download was added, moved on, changed state or finished."""

    item: DownloadItem


@dataclass(frozen=True)
class ModelRow:
    """One installed (or referenced, or missing) model as front ends show it.

    details: what its files say (app/library/model_details.py); {} when unreadable, and
    problem then says why. fit: None while the hardware is not known, or when missing.
    """

    model: InstalledModel
    details: Mapping[str, Any]
    problem: str | None
    fit: FitEstimate | None
    is_default: bool
    is_loaded: bool


@dataclass(frozen=True)
class CatalogRow:
    """A model of the catalog, whether it fits here, and the library model it became; reason:
    why it is recommended on this machine (only on the row LibraryService.recommended() gives)."""

    entry: CatalogEntry
    fit: FitEstimate | None
    installed_id: str | None
    reason: str = ""


@dataclass(frozen=True)
class LibraryListed:
    """The library as it is now: every model's row, and the bytes Kestrel's models folder holds."""

    rows: tuple[ModelRow, ...]
    disk_total: int


@dataclass(frozen=True)
class CatalogListed:
    """The catalog's models, each with its fit on this machine."""

    rows: tuple[CatalogRow, ...]


class SpeechState(StrEnum):
    """Where a speech model or voice is: shipped with Kestrel, downloaded, offered to download, or part of the
    system (Windows' own voices)."""

    SHIPPED = "shipped"
    DOWNLOADED = "downloaded"
    OFFERED = "offered"
    SYSTEM = "system"  # one of Windows' own voices


@dataclass(frozen=True)
class SpeechRow:
    """One speech-to-text model or voice as Models → Speech shows it.

    kind: "transcription" or "voice" (app/voice/catalog/entries.py's SpeechKind); languages: what it hears or
    speaks, in words; fit: how it would run here (None before the hardware is known); in_use: chosen in
    Settings → Voice (or, with nothing chosen, the one used for English)."""

    id: str
    kind: str
    title: str
    languages: str
    size: int
    license: str
    source: str
    description: str
    state: SpeechState
    fit: SpeechFit | None
    in_use: bool
    downloadable: bool


@dataclass(frozen=True)
class SpeechListed:
    """The speech models and voices as they are now."""

    rows: tuple[SpeechRow, ...]
