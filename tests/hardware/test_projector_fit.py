"""Will it fit? A vision projector loads beside the model, so its bytes count as weights:
for an installed model (its projector file) and a catalog row (the entry's size)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from app.hardware.fit import Verdict, estimate_fit
from app.hardware.report import HardwareReport, RamInfo
from app.library.catalog import parse_entry
from app.library.fit_facts import facts_for, facts_for_catalog
from tests.hardware.machines import recorded_report
from tests.helpers.projector_header import write_projector

_GIB = 1024**3


@pytest.fixture(scope="module")
def two_gib_free() -> HardwareReport:
    """A machine without a GPU llama.cpp can use, with 2 GiB of RAM free."""
    return dataclasses.replace(recorded_report("linux_vm"), ram=RamInfo(total=64 * _GIB, available=2 * _GIB))


def test_an_installed_model_that_fits_alone_does_not_fit_with_its_projector(
        tiny_model: Path, tmp_path: Path, two_gib_free: HardwareReport) -> None:
    projector = write_projector(tmp_path / "mmproj-tiny-f16.gguf", projection_dim=None)
    os.truncate(projector, 2 * _GIB)  # sparse: the fit reads only the file's size

    alone = facts_for(tiny_model, 4096)
    paired = facts_for(tiny_model, 4096, projector)
    fit_alone = estimate_fit(two_gib_free, alone, context_length=alone.context_length)
    fit_paired = estimate_fit(two_gib_free, paired, context_length=paired.context_length)

    assert paired.file_size == alone.file_size + 2 * _GIB and paired.projector_bytes == 2 * _GIB
    assert fit_alone.verdict is Verdict.RUNS_WELL, fit_alone.summary
    assert fit_paired.verdict is Verdict.WONT_FIT, fit_paired.summary
    assert fit_paired.need.weights > 2 * _GIB
    assert fit_paired.lines[0].endswith("(the vision projector's 2.0 GB among them)")
    assert "projector" not in fit_alone.lines[0]
    assert facts_for(tiny_model, 4096, tmp_path / "gone.gguf") == alone, "a projector not there adds nothing"


def test_a_catalog_row_counts_its_projector_in_the_verdict(two_gib_free: HardwareReport) -> None:
    raw = {"id": "m", "name": "M", "publisher": "P", "license": "mit", "parameters": "1B",
           "quantization": "Q4_K_M", "format": "gguf", "context_length": 4096, "repo": "o/m",
           "revision": "main", "files": [{"path": "m.gguf", "size": _GIB}], "instruct": True,
           "recommended": False, "description": "d",
           "shape": {"layers": 16, "kv_heads": 8, "head_size": 64, "embedding_length": 2048, "vocab_size": 32000}}
    alone = facts_for_catalog(parse_entry(raw), 2048)
    paired = facts_for_catalog(parse_entry({**raw, "projector": {"path": "mmproj.gguf", "size": _GIB}}), 2048)
    assert alone is not None and paired is not None

    fit_alone = estimate_fit(two_gib_free, alone, context_length=2048)
    fit_paired = estimate_fit(two_gib_free, paired, context_length=2048)

    assert paired.file_size == 2 * _GIB and paired.projector_bytes == _GIB
    assert fit_alone.verdict is Verdict.RUNS_WELL, fit_alone.summary
    assert fit_paired.verdict is Verdict.WONT_FIT, fit_paired.summary
