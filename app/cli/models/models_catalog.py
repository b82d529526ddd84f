"""`python -m app models catalog`: the models Kestrel offers, each with how it would run on this machine,
and the one recommended for this machine (not the catalog file's own flag)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from app.hardware.speed import Measured

from app.cli.user_error import EXIT_OK
from app.cli.models.models_common import load_settings, open_library
from app.core.paths import data_paths
from app.core.units import human_size
from app.hardware.fit import FitEstimate, Verdict
from app.hardware.report import HardwareReport
from app.library.catalog import CatalogEntry, load_catalog
from app.library.model_files.model_purpose import ModelPurpose
from app.service.events import CatalogRow
from app.service.library.library_service import catalog_fit, installed_as
from app.service.library.recommendation import recommend
from app.service.library.speed_judge import measured_speeds, with_reads

_VERDICT_WORDS = {Verdict.RUNS_WELL: "runs well", Verdict.USABLE: "usable", Verdict.RUNS_SLOWLY: "slow",
                  Verdict.WONT_FIT: "will not fit"}
_ORDER = {Verdict.RUNS_WELL: 0, Verdict.USABLE: 1, Verdict.RUNS_SLOWLY: 2, Verdict.WONT_FIT: 3}
RECOMMENDED_MARK = "(recommended for this machine)"


def add_arguments(catalog: argparse.ArgumentParser) -> None:
    catalog.add_argument("--json", action="store_true", help="one JSON object per line")
    catalog.add_argument("--sort", choices=("catalog", "speed"), default="catalog",
                         help="the catalog's order (default), or best first: what runs well here, faster first")
    catalog.add_argument("--runs-well", action="store_true",
                         help="only the models predicted to run at a comfortable speed here")
    catalog.add_argument("--speech", action="store_true",
                         help="the speech-to-text models and voices instead (shipped, downloaded or offered)")


def list_catalog(args: argparse.Namespace) -> int:
    if args.speech:
        return _list_speech(args)
    problems: list[str] = []
    entries = load_catalog(problems=problems)
    for problem in problems:
        print(f"kestrel: {problem}", file=sys.stderr)
    report, rows = _judged_rows(entries)
    pick = recommend(rows, report)
    chosen = pick.row.entry.id if pick is not None else None
    if args.runs_well:
        rows = [r for r in rows if r.fit is not None and r.fit.verdict == Verdict.RUNS_WELL
                and r.entry.purpose is ModelPurpose.CHAT]
    if args.sort == "speed":
        rows = sorted(rows, key=_rank)
    if args.json:
        for row in rows:
            print(json.dumps(_json_row(row, row.entry.id == chosen), ensure_ascii=False))
        return EXIT_OK
    width = max((len(r.entry.id) for r in rows), default=0)
    for row in rows:
        print(_line(row, width, row.entry.id == chosen))
    if pick is not None:
        print(f"\nRecommended for this machine: {pick.row.entry.id}. {pick.reason}")
    return EXIT_OK


def _list_speech(args: argparse.Namespace) -> int:
    """Models → Speech's list: each speech model and voice, where it is, and how it would run here."""
    from app.hardware.probe import probe
    from app.service.library.speech_shelf import speech_rows

    _, settings = load_settings()
    rows = speech_rows(data_paths().data / "speech", probe(), settings)
    if args.json:
        for row in rows:
            fit = row.fit
            print(json.dumps({"id": row.id, "kind": row.kind, "name": row.title, "languages": row.languages,
                              "size": row.size, "state": row.state.value, "in_use": row.in_use,
                              "license": row.license, "source": row.source,
                              "verdict": fit.verdict.value if fit else None,
                              "real_time_factor": round(fit.real_time_factor, 3) if fit else None,
                              "fit": fit.words if fit else None}, ensure_ascii=False))
        return EXIT_OK
    width = max((len(row.id) for row in rows), default=0)
    for row in rows:
        state = {"shipped": "ships with Kestrel", "downloaded": "downloaded", "system": "part of Windows"}.get(
            row.state.value, f"get it: kestrel models get {row.id}")
        kind = "speech to text" if row.kind == "transcription" else "voice"
        size = human_size(row.size) if row.size else "—"
        print(f"{row.id:<{width}}  {kind:<14}  {size:>9}  {row.languages:<14}  {state}"
              f"{' (in use)' if row.in_use else ''}")
        if row.fit is not None:
            print(f"{'':<{width}}  {row.fit.words}")
    return EXIT_OK


def _judged_rows(entries: tuple[CatalogEntry, ...]) -> tuple[HardwareReport, list[CatalogRow]]:
    """Each entry with its steady verdict by speed on this machine, as the window's catalog shows it."""
    from app.hardware.probe import probe  # the runtimes' checks: only the commands that judge need them

    _, settings = load_settings()
    report = probe()
    measured = measured_here()
    context = settings.generation.context_length
    installed = open_library().list()
    return report, [CatalogRow(e, catalog_fit(report, e, min(context, e.context_length), 0,
                                              settings.device_preference, settings.comfortable_tokens_per_s,
                                              measured), installed_as(e, installed)) for e in entries]


def measured_here() -> tuple[Measured, ...]:
    """What this machine's answers measured, from the thread advisor's threads.json beside the settings (as
    the window reads it), each weighed by its file where the library holds it: every verdict by speed a
    command gives is calibrated with it."""
    return with_reads(measured_speeds(data_paths().config / "threads.json"),
                      [model.path for model in open_library().list()])


def _rank(row: CatalogRow) -> tuple[int, float]:
    fit = row.fit
    if row.entry.purpose is not ModelPurpose.CHAT or fit is None:
        return len(_ORDER), 0.0
    return _ORDER[fit.verdict], -(fit.speed.tokens_per_s if fit.speed is not None else 0.0)


def _line(row: CatalogRow, width: int, recommended: bool) -> str:
    e = row.entry
    size = human_size(e.size) if e.size is not None else "size n/a"
    mark = f"  {RECOMMENDED_MARK}" if recommended else ""
    if e.purpose is not ModelPurpose.CHAT:
        mark = f"  ({e.purpose.value}: for document search, not chat)"
    return (f"{e.id:<{width}}  {e.format:<4}  {size:>8}  {e.name}, {e.parameters} {e.quantization}, "
            f"{e.license}  [{_verdict_words(row.fit, e)}]{mark}")


def _verdict_words(fit: FitEstimate | None, entry: CatalogEntry) -> str:
    return "embedding" if entry.purpose is not ModelPurpose.CHAT else verdict_words(fit)


def verdict_words(fit: FitEstimate | None, unknown: str = "not known yet") -> str:
    """A verdict as the commands print it: "runs well: about 25 tokens/s here", "slow: about 2 tokens/s
    here (estimated)", "will not fit"; `unknown` where there is none."""
    if fit is None:
        return unknown
    words = _VERDICT_WORDS[fit.verdict]
    return f"{words}: {fit.speed.words}" if fit.speed is not None and fit.verdict != Verdict.WONT_FIT else words


def _json_row(row: CatalogRow, recommended: bool) -> dict[str, Any]:
    entry, fit = row.entry, row.fit
    data = asdict(entry)
    data["files"] = [asdict(f) for f in entry.files]
    data["recommended_here"] = recommended
    chat = entry.purpose is ModelPurpose.CHAT
    data["verdict"] = fit.verdict.value if fit is not None and chat else None
    data["summary"] = fit.summary if fit is not None else None
    data["tokens_per_s"] = round(fit.speed.tokens_per_s, 1) if fit is not None and fit.speed is not None else None
    data["speed_measured"] = fit.speed.measured if fit is not None and fit.speed is not None else None
    return data
