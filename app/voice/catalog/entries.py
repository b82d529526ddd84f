"""The catalog's speech models and voices (resources/catalog.json's "speech" list): bigger and multilingual
Whisper models and more Piper voices, downloaded from Hugging Face at a pinned commit into Kestrel's data
folder, every file checked by its size and SHA-256 (app/voice/catalog/fetch.py).

An entry is read into the same shapes as the speech that ships (SpeechModel, Voice) with its repository and
revision set, so dictation, read-aloud, the CLI and the API take a downloaded one as they take a shipped one.
Unlike a chat model's entry, every file must state its size and SHA-256: a speech model is a folder of files
that must belong together, and nothing of it is read before all of them are checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any

from app.core.speech_languages import WHISPER_LANGUAGES
from app.library.catalog import (CATALOG_FILE, HF_REPO, CatalogEntryError, CatalogFile, catalog_data, catalog_file,
                                 flag_field, list_field, text_field)
from app.voice.speech_models import SHIPPED_SPEECH_MODELS, ShippedFile, SpeechModel
from app.voice.synthesis.voices import SHIPPED_VOICES, Bundle, Voice

# The files a Whisper model in CTranslate2's format is read from (faster-whisper's WhisperModel).
WHISPER_FILES = ("model.bin", "config.json", "tokenizer.json")
_REVISION_LENGTH = 40


class SpeechKind(StrEnum):
    TRANSCRIPTION = "transcription"  # speech to text: a Whisper model
    VOICE = "voice"  # text to speech: a Piper voice


@dataclass(frozen=True)
class SpeechEntry:
    """One speech model or voice the catalog offers: where its files are, what they weigh, and whose it is.

    parameters_m: a Whisper model's size in millions of parameters, what its speed is judged by (0 for a voice,
    judged by its file).
    multilingual: a Whisper model that hears 99 languages (False: English only).
    language: what a voice speaks (an ISO 639-1 code; Kestrel reads English only, app/voice/synthesis/g2p.py).
    """

    id: str
    kind: SpeechKind
    name: str
    publisher: str
    license: str
    repo: str
    revision: str
    files: tuple[CatalogFile, ...]
    parameters_m: int
    description: str
    multilingual: bool = False
    language: str = "en"

    @property
    def size(self) -> int:
        return sum(file.size or 0 for file in self.files)

    @property
    def source(self) -> str:
        return f"{self.repo} at {self.revision[:12]}"


def load_speech_catalog(path: Path | None = None, problems: list[str] | None = None) -> tuple[SpeechEntry, ...]:
    """The catalog's speech entries in its order; a damaged entry is skipped and said in problems (a damaged
    or missing file too: then nothing is offered, the shipped speech still works)."""
    path = path or CATALOG_FILE
    said = problems if problems is not None else []
    data = catalog_data(path, said, "speech model")
    raw_entries = data.get("speech", []) if data is not None else []
    if not isinstance(raw_entries, list):
        said.append(f"The model catalog {path} holds no list of speech models; none is offered.")
        return ()
    entries: list[SpeechEntry] = []
    for index, raw in enumerate(raw_entries):
        try:
            entry = parse_speech_entry(raw)
        except CatalogEntryError as exc:
            said.append(f"Speech entry {index + 1} was skipped: {exc}.")
            continue
        if any(e.id == entry.id for e in entries):
            said.append(f"Speech entry {index + 1} was skipped: the id {entry.id!r} is taken.")
            continue
        entries.append(entry)
    return tuple(entries)


def parse_speech_entry(raw: Any) -> SpeechEntry:
    """One entry from its JSON; CatalogEntryError naming the first thing wrong."""
    if not isinstance(raw, dict):
        raise CatalogEntryError("it is not an object")
    text = {name: text_field(raw, name)
            for name in ("id", "name", "publisher", "license", "repo", "revision", "description")}
    if not HF_REPO.match(text["repo"]):
        raise CatalogEntryError(f"repo {text['repo']!r} is not a Hugging Face owner/name")
    if len(text["revision"]) != _REVISION_LENGTH or any(c not in "0123456789abcdef" for c in text["revision"]):
        raise CatalogEntryError("revision is not a full commit id (40 lowercase hexadecimal digits)")
    if not all(c.isalnum() or c in "._-" for c in text["id"]):
        raise CatalogEntryError(f"id {text['id']!r} has characters other than letters, digits, '.', '_' and '-'")
    named = raw.get("kind")
    if named not in tuple(SpeechKind):
        raise CatalogEntryError(f"kind {named!r} is neither \"transcription\" nor \"voice\"")
    kind = SpeechKind(named)
    files = tuple(catalog_file(item) for item in list_field(raw, "files"))
    for file in files:
        if file.sha256 is None or file.size is None:
            raise CatalogEntryError(f"{file.path} does not state both its size and its SHA-256")
    names = [PurePosixPath(file.path).name for file in files]
    if len(set(names)) != len(names):
        raise CatalogEntryError("two files have the same name")
    parameters = raw.get("parameters_millions", 0)
    language = raw.get("language", "en")
    if kind is SpeechKind.TRANSCRIPTION:
        if not isinstance(parameters, int) or isinstance(parameters, bool) or parameters <= 0:
            raise CatalogEntryError("parameters_millions is not a positive whole number")
        missing = [name for name in WHISPER_FILES if name not in names]
        if missing or not any(name in ("vocabulary.txt", "vocabulary.json") for name in names):
            raise CatalogEntryError(f"a Whisper model lists no {', '.join(missing) or 'vocabulary'}")
    else:
        if len(files) != 2 or not names[0].endswith(".onnx") or names[1] != f"{names[0]}.json":
            raise CatalogEntryError("a voice lists its .onnx file, then its .onnx.json, and nothing else")
        if language != "en":
            raise CatalogEntryError(f"Kestrel reads English only, and the voice speaks {language!r}")
    if not isinstance(language, str) or language not in WHISPER_LANGUAGES:
        raise CatalogEntryError(f"language {language!r} is not an ISO 639-1 code Whisper knows")
    return SpeechEntry(text["id"], kind, text["name"], text["publisher"], text["license"], text["repo"],
                       text["revision"], files, parameters, text["description"],
                       flag_field(raw, "multilingual"), language)


def as_speech_model(entry: SpeechEntry) -> SpeechModel:
    return SpeechModel(entry.id, entry.name, _files(entry), entry.multilingual, entry.license,
                       f"{entry.publisher}, {entry.source}", entry.parameters_m, entry.repo, entry.revision)


def as_voice(entry: SpeechEntry) -> Voice:
    model, config = (PurePosixPath(file.path).name for file in entry.files)
    return Voice(entry.id, entry.name, Bundle(f"voice-{entry.id}", f"the voice {entry.id}", _files(entry)),
                 model, config, entry.language, entry.license, f"{entry.publisher}, {entry.source}",
                 entry.repo, entry.revision)


def _files(entry: SpeechEntry) -> tuple[ShippedFile, ...]:
    # Downloaded, not put together from packages: no pieces. The size and SHA-256 are checked as they arrive.
    return tuple(ShippedFile(PurePosixPath(file.path).name, (), file.size or 0, file.sha256 or "")
                 for file in entry.files)


@cache
def speech_catalog() -> tuple[SpeechEntry, ...]:
    """The shipped catalog's speech entries, read once (what is wrong with one is in the app's log)."""
    import logging
    problems: list[str] = []
    entries = load_speech_catalog(problems=problems)
    for problem in problems:
        logging.getLogger(__name__).warning("%s", problem)
    return entries


def catalog_speech_models() -> tuple[SpeechModel, ...]:
    """The catalog's speech-to-text models that do not ship. An entry with a shipped model's id is where the
    installed app, which leaves that model out, downloads it from: to the very folder the shipped one is looked
    for in, with the same files (Whisper base)."""
    shipped = {model.id for model in SHIPPED_SPEECH_MODELS}
    return tuple(as_speech_model(entry) for entry in speech_catalog()
                 if entry.kind is SpeechKind.TRANSCRIPTION and entry.id not in shipped)


def catalog_voices() -> tuple[Voice, ...]:
    shipped = {voice.id for voice in SHIPPED_VOICES}
    return tuple(as_voice(entry) for entry in speech_catalog()
                 if entry.kind is SpeechKind.VOICE and entry.id not in shipped)
