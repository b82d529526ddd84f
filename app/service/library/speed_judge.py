"""Each model's verdict by its speed here: the fit, with tokens/s predicted and calibrated by this machine's answers."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import psutil

from app.core.settings import DevicePreference
from app.hardware.fit import FitEstimate, estimate_fit, with_speed
from app.hardware.report import HardwareReport
from app.hardware.speed import Measured, active_share, decode_cost, embedding_table_share, predict
from app.library.fit_facts import facts_for
from app.library.model_files.gguf_info import ModelFileError


def measured_speeds(path: Path | None) -> tuple[Measured, ...]:
    """What this machine decoded, from the thread advisor's threads.json (app/service/models/threads.py):
    per model key ("file name|bytes|logical CPUs|physical cores") the best tokens/s per thread count.
    Keys of another CPU (a copied home folder) are left out; an unreadable file is no measurement."""
    if path is None:
        return ()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return ()
    return measured_from(data if isinstance(data, dict) else {}, os.cpu_count(), psutil.cpu_count(logical=False))


def measured_from(data: Mapping[str, object], logical: int | None, physical: int | None) -> tuple[Measured, ...]:
    """The measurements of threads.json's contents for the CPU with these counts."""
    found = []
    for key, entry in data.items():
        parts = str(key).split("|")
        if len(parts) != 4 or parts[2:] != [str(logical), str(physical)] or not isinstance(entry, dict):
            continue
        best = entry.get("best")
        if not parts[1].isdigit() or not isinstance(best, dict):
            continue
        for threads, rate in best.items():
            if str(threads).isdigit() and isinstance(rate, (int, float)) and rate > 0:
                found.append(Measured(parts[0], int(parts[1]), float(rate), int(threads)))
    return tuple(found)


def with_reads(measured: Sequence[Measured], files: Iterable[Path]) -> tuple[Measured, ...]:
    """measured with what a token of each model reads, from its file's header where one of `files` is
    it (same name and bytes): calibration then weighs a measured model as it weighs the one judged.
    Reads headers: call it off the event loop."""
    by_key = {(path.name, _size(path)): path for path in files}
    return tuple(dataclasses.replace(m, read_bytes=read_bytes(by_key[(m.name, m.model_bytes)]))
                 if (m.name, m.model_bytes) in by_key else m for m in measured)


def read_bytes(path: Path) -> int:
    """What a token of the model at path reads, weighed by format (decode_cost); 0 when not known."""
    try:
        stat = path.stat()
    except OSError:
        return 0
    return _read_bytes(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _read_bytes(path: str, size: int, modified: int) -> int:
    try:
        facts = facts_for(Path(path), 512)
    except (ModelFileError, OSError, ValueError):
        return 0
    if not facts.read_per_token:
        return 0
    return decode_cost(facts.file_size, 0, 0, read_per_token=facts.read_per_token).weights


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def quiet_threads(report: HardwareReport) -> int:
    """The threads an answer gets on a quiet machine: one per physical core (the thread advisor's choice)."""
    return max(1, (report.cpu.cores if report.cpu and report.cpu.cores else None) or os.cpu_count() or 1)


def judged(fit: FitEstimate, report: HardwareReport, *, weights: int, vocab: int, parameters: str,
           comfortable: float, onnx: bool = False, measured: Sequence[Measured] = (),
           threads: int | None = None, read_per_token: Mapping[str, int] | None = None,
           embedding_length: int = 0) -> FitEstimate:
    """fit with its verdict by speed. weights: the model's file bytes; read_per_token: the bytes a token
    reads by number format, where the file's header said (FitFacts.read_per_token; else the weights less
    the embedding table's estimated share, from vocab, embedding_length and parameters);
    parameters: the catalog's or the GGUF's size words ("30.5B (3.3B active)", "30B-A3B"), which give
    a mixture of experts' active share."""
    cost = decode_cost(weights, fit.need.kv_cache, fit.context_length, vocab=vocab,
                       active_share=active_share(parameters), onnx=onnx, read_per_token=read_per_token,
                       embedding_share=embedding_table_share(parameters, vocab, embedding_length))
    speed = predict(report, cost, kind=fit.device_kind, device_name=fit.device_name,
                    threads=threads or quiet_threads(report), accelerated_share=fit.accelerated_share,
                    measured=measured)
    return with_speed(fit, speed, comfortable)


def file_fit(report: HardwareReport, path: Path, context_length: int, preference: DevicePreference, *,
             projector: Path | None = None, chat: bool, parameters: str, comfortable: float,
             measured: Sequence[Measured] = ()) -> FitEstimate | None:
    """A model file's steady verdict, as the window and `models info` judge it: by predicted speed for a
    chat model, by memory alone for an embedding model (it never answers a chat); None when the file
    cannot be read (whoever shows the verdict says what is wrong with the file)."""
    try:
        facts = facts_for(path, context_length, projector)
        fit = estimate_fit(report, facts, context_length=context_length, preference=preference, steady=True)
    except (ModelFileError, OSError, ValueError):
        return None
    if not chat:
        return fit
    return judged(fit, report, weights=facts.file_size - facts.projector_bytes, vocab=facts.shape.vocab_size,
                  parameters=parameters, comfortable=comfortable, onnx=facts.format == "onnx", measured=measured,
                  read_per_token=facts.read_per_token, embedding_length=facts.shape.embedding_length)
