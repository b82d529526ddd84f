"""Models → Speech: the speech-to-text models and voices Kestrel ships and the catalog offers, each with how it
would run here, downloaded through the model downloads (app/service/library/downloads.py), removed, or chosen for
dictation and read-aloud (Settings → Voice). Its rows go out as SpeechListed."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.core.settings import Settings
from app.hardware.report import HardwareReport
from app.hardware.speech_fit import voice_fit, whisper_fit
from app.service.events import DownloadChanged, DownloadState, Event, Problem, SpeechListed, SpeechRow, SpeechState

if TYPE_CHECKING:
    from app.service.library.downloads import DownloadQueue
    from app.voice.catalog.entries import SpeechEntry

_VOICE_LANGUAGES = {"en_US": "English (U.S.)", "en_GB": "English (U.K.)"}


class SpeechShelf:
    """The speech list's owner: its rows (refresh), and downloading, removing and choosing one."""

    def __init__(self, speech_folder: Path, settings: Callable[[], Settings],
                 update_settings: Callable[[Settings], Awaitable[None]],
                 hardware: Callable[[], Awaitable[HardwareReport | None]],
                 downloads: Callable[[], DownloadQueue | None], emit: Callable[[Event], None],
                 spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]],
                 release: Callable[[str], Awaitable[bool]] | None = None) -> None:
        """spawn: the service's task group (a listing a finished download asks for ends with it at shutdown);
        release(id): dictation and read-aloud let go of that model or voice (False: it is in use now)."""
        self._spawn = spawn
        self._release = release
        self._speech_folder = speech_folder
        self._settings = settings
        self._update_settings = update_settings
        self._hardware = hardware
        self._downloads = downloads
        self._emit = emit
        self.rows: tuple[SpeechRow, ...] = ()

    async def refresh(self) -> None:
        """List the speech models and voices (the catalog and the folder read on a worker thread)."""
        report = await self._hardware()
        self.rows = await asyncio.to_thread(speech_rows, self._speech_folder, report, self._settings())
        self._emit(SpeechListed(self.rows))

    async def usable(self) -> tuple[tuple[str, str, str], ...]:
        """(kind, id, title) of each speech model and voice that is here to use (shipped or downloaded), for
        Settings → Voice; read on a worker thread."""
        rows = await asyncio.to_thread(speech_rows, self._speech_folder, None, self._settings())
        return tuple((row.kind, row.id, row.title) for row in rows if row.state is not SpeechState.OFFERED)

    def download(self, speech_id: str) -> None:
        """Start downloading a catalog speech model or voice; the list says when it is in."""
        from app.voice.catalog.entries import speech_catalog
        from app.voice.catalog.fetch import speech_unit
        entry = next((entry for entry in speech_catalog() if entry.id == speech_id), None)
        queue = self._downloads()
        if entry is None:
            self._emit(Problem(f"The catalog offers no speech model or voice {speech_id!r}."))
        elif queue is None:
            self._emit(Problem(f"Downloads are not available here; use: kestrel models get {speech_id}"))
        else:
            queue.start(speech_unit(entry))

    async def remove(self, speech_id: str) -> None:
        """Delete a downloaded speech model or voice; a setting that chose it goes back to the default."""
        from app.voice.catalog.entries import speech_catalog
        from app.voice.catalog.fetch import remove_speech
        entry = next((entry for entry in speech_catalog() if entry.id == speech_id), None)
        if entry is None:
            return
        if self._release is not None and not await self._release(speech_id):
            self._emit(Problem(f"{entry.name} is in use: stop dictating (or reading aloud) first, then remove it."))
            return
        try:
            await asyncio.to_thread(remove_speech, entry, self._speech_folder)
        except OSError as exc:  # it stays chosen where it was: what is left of it is listed as it is
            self._emit(Problem(f"{entry.name} could not be removed from {self._speech_folder}: "
                               f"{exc.strerror or exc}. Close what uses it and try again.", "disk"))
            await self.refresh()
            return
        settings = self._settings()
        voice = settings.voice
        if voice.speech_model == speech_id:
            voice = dataclasses.replace(voice, speech_model=None)
        if voice.voice == speech_id:
            voice = dataclasses.replace(voice, voice=None)
        if voice != settings.voice:
            await self._update_settings(dataclasses.replace(settings, voice=voice))
        await self.refresh()

    async def use(self, speech_id: str, kind: str) -> None:
        """Choose a speech model (kind "transcription") for dictation or a voice for read-aloud (Settings → Voice)."""
        settings = self._settings()
        voice = dataclasses.replace(settings.voice, speech_model=speech_id) if kind == "transcription" \
            else dataclasses.replace(settings.voice, voice=speech_id)
        await self._update_settings(dataclasses.replace(settings, voice=voice))
        await self.refresh()

    def download_changed(self, event: DownloadChanged) -> None:
        """A download ended: if it was speech, the list changes (called on the loop)."""
        from app.voice.catalog.entries import speech_catalog
        item = event.item
        if item.state == DownloadState.DONE and any(entry.id == item.catalog_id for entry in speech_catalog()):
            self._spawn(self.refresh())


def speech_rows(speech_folder: Path, report: HardwareReport | None, settings: Settings) -> tuple[SpeechRow, ...]:
    """Every speech model and voice, shipped, downloaded to speech_folder or offered, judged against report
    (None: not judged); what the settings use is marked. Reads the disk: call it on a worker thread."""
    from app.voice.catalog.entries import SpeechKind, speech_catalog
    from app.voice.catalog.fetch import is_downloaded
    from app.voice.catalog.choice import choose_voice, dictation_model
    from app.voice.speech_models import SHIPPED_SPEECH_MODELS, installed_folder, shipped
    from app.voice.synthesis.voices import SHIPPED_VOICES, VoiceError, voice_shipped
    entries = {entry.id: entry for entry in speech_catalog()}
    voice_settings = settings.voice
    listening, _ = dictation_model(voice_settings.language, None, voice_settings.speech_model)
    try:
        speaking = choose_voice(voice_settings.voice).id
    except VoiceError:  # a voice the catalog no longer offers: none is marked
        speaking = None
    rows: list[SpeechRow] = []
    for model in SHIPPED_SPEECH_MODELS:  # a shipped model the build leaves out is offered by the catalog
        entry = entries.pop(model.id, None)
        state = (SpeechState.SHIPPED if shipped(model) else SpeechState.DOWNLOADED
                 if installed_folder(model, speech_folder) is not None else SpeechState.OFFERED)
        if state is SpeechState.OFFERED and entry is None:
            continue
        source = _source(entry) if entry is not None and state is not SpeechState.SHIPPED else model.source
        rows.append(SpeechRow(model.id, SpeechKind.TRANSCRIPTION, model.title, _hears(model.multilingual),
                              sum(file.size for file in model.files), model.license, source,
                              entry.description if entry else "Ships with Kestrel.", state,
                              whisper_fit(model.parameters_m, sum(file.size for file in model.files), report)
                              if report is not None else None,
                              listening.id == model.id, entry is not None and state is not SpeechState.SHIPPED))
    for voice in SHIPPED_VOICES:
        size = sum(file.size for file in voice.bundle.files)
        rows.append(SpeechRow(voice.id, SpeechKind.VOICE, voice.title, _speaks(voice.id), size, voice.license,
                              voice.source, "Ships with Kestrel.",
                              SpeechState.SHIPPED if voice_shipped(voice) else SpeechState.OFFERED,
                              voice_fit(size, report) if report is not None else None, speaking == voice.id, False))
    for entry in entries.values():
        state = SpeechState.DOWNLOADED if is_downloaded(entry, speech_folder) else SpeechState.OFFERED
        transcription = entry.kind is SpeechKind.TRANSCRIPTION
        fit = None if report is None else whisper_fit(entry.parameters_m, entry.size, report) if transcription \
            else voice_fit(entry.size, report)
        rows.append(SpeechRow(entry.id, entry.kind, entry.name,
                              _hears(entry.multilingual) if transcription else _speaks(entry.id), entry.size,
                              entry.license, _source(entry), entry.description, state, fit,
                              (listening.id if transcription else speaking) == entry.id, True))
    rows.extend(_windows_rows(speaking))
    return tuple(rows)


WINDOWS_VOICE_WORDS = ("One of Windows' own voices: it needs no download, and reads numbers, abbreviations and "
                       "names in its own language. Windows' Settings → Time & language → Speech adds more.")


def _windows_rows(speaking: str | None) -> list[SpeechRow]:
    """Windows' own voices (none elsewhere): the one Windows speaks with is in use when nothing is chosen."""
    from app.voice.catalog.entries import SpeechKind
    from app.voice.synthesis.windows_voices import WINDOWS_DEFAULT, system_voices
    return [SpeechRow(voice.id, SpeechKind.VOICE, voice.title, voice.languages or voice.language or "—", 0,
                      voice.license, voice.source, WINDOWS_VOICE_WORDS, SpeechState.SYSTEM, None,
                      speaking == voice.id or (speaking == WINDOWS_DEFAULT.id and voice.is_default), False)
            for voice in system_voices()]


def _hears(multilingual: bool) -> str:
    return "99 languages" if multilingual else "English"


def _speaks(voice_id: str) -> str:
    return _VOICE_LANGUAGES.get(voice_id.split("-", 1)[0], "English")


def _source(entry: SpeechEntry) -> str:
    return f"{entry.publisher}; downloaded from Hugging Face, {entry.repo} at commit {entry.revision[:12]}"
