"""The model manager's item models: diffing updates, only changed roles, filters; checked by QAbstractItemModelTester."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QAbstractItemModelTester

from app.library.catalog import CatalogEntry, CatalogFile
from app.hardware.fit import FitEstimate, MemoryNeed, Verdict, with_speed
from app.hardware.speed import SpeedEstimate
from app.library.model_files.model_purpose import ModelPurpose
from app.library.installed import InstalledModel
from app.service.events import DownloadItem, DownloadState
from app.service.events import CatalogRow, ModelRow
from app.ui.state.download_items import DOWNLOAD_STATE_WORDS, DownloadsModel, duration_text
from app.ui.state.fit_verdict import VERDICT_COLOURS, VERDICT_WORDS
from app.ui.state.model_items import CatalogModel, InstalledModelsModel, ModelFilter, Roles, parameters_text

Display = Qt.ItemDataRole.DisplayRole


def fit(verdict: str, summary: str = "Runs well on the GPU (NVIDIA GeForce RTX 4070)",
        max_context: int | None = 32768) -> FitEstimate:
    return FitEstimate(verdict=Verdict(verdict), summary=summary, context_length=4096,
                       need=MemoryNeed(weights=1_000_000_000, kv_cache=100_000_000, compute=100_000_000),
                       device_kind="gpu", device_name="NVIDIA GeForce RTX 4070", available=12_000_000_000,
                       freed_by_unloading=0, max_context=max_context,
                       lines=("Needs 1.2 GB: weights 1.0 GB, KV cache 0.1 GB, compute 0.1 GB",))


def installed(model_id: str, **changes) -> ModelRow:
    model = InstalledModel(id=model_id, title=model_id.title(), path=Path(f"/m/{model_id}.gguf"), size=1_500_000_000,
                           sha256=None, source="imported", added=0.0, format="gguf")
    row = ModelRow(model, {"format": "gguf", "parameters_label": "1.5B", "quantization": "Q4_K_M"}, None,
                   fit("runs_well"), False, False)
    return dataclasses.replace(row, **changes)


def entry(entry_id: str, **changes) -> CatalogEntry:
    base = CatalogEntry(id=entry_id, name=entry_id.title(), publisher="Qwen", license="apache-2.0", parameters="1.5B",
                        quantization="Q4_K_M", format="gguf", context_length=32768, size=1_117_320_736,
                        repo="Qwen/x", revision="main", files=(CatalogFile("x.gguf"),), instruct=True,
                        recommended=False, description="A small chat model.")
    return dataclasses.replace(base, **changes)


def catalog_row(entry_id: str, verdict: str | None = "runs_well", installed_id: str | None = None,
                **changes) -> CatalogRow:
    return CatalogRow(entry(entry_id, **changes), fit(verdict) if verdict else None, installed_id)


def checked(model):
    return QAbstractItemModelTester(model, QAbstractItemModelTester.FailureReportingMode.Fatal)


def ids(model) -> list[str]:
    return [model.index(r, 0).data(Roles.ID) for r in range(model.rowCount())]


def test_installed_rows_insert_remove_move_and_update_by_id(qtbot) -> None:
    model = InstalledModelsModel()
    tester = checked(model)
    model.set_listing([installed("a"), installed("b"), installed("c")], 3_000_000_000)
    assert ids(model) == ["a", "b", "c"]
    happened: list[str] = []
    model.rowsRemoved.connect(lambda *_: happened.append("removed"))
    model.rowsMoved.connect(lambda *_: happened.append("moved"))
    model.rowsInserted.connect(lambda *_: happened.append("inserted"))
    model.modelReset.connect(lambda: happened.append("reset"))
    model.set_listing([installed("c"), installed("d"), installed("a")], 3_000_000_000)
    assert happened == ["removed", "moved", "inserted"]  # b gone, c moved up, d new; never a reset
    assert ids(model) == ["c", "d", "a"]
    model.set_listing([], 0)
    assert model.rowCount() == 0
    model.set_listing([installed("x"), installed("y")], 1)
    assert ids(model) == ["x", "y"]
    del tester


def test_a_changed_row_announces_only_its_changed_roles_and_columns(qtbot) -> None:
    model = InstalledModelsModel()
    checked(model)
    model.set_listing([installed("a"), installed("b")], 0)
    seen: list[tuple[int, int, int, list[int]]] = []
    model.dataChanged.connect(lambda tl, br, roles: seen.append((tl.row(), tl.column(), br.column(), list(roles))))
    model.set_listing([installed("a"), installed("b", fit=fit("wont_fit", summary="Will not fit"))], 0)
    assert len(seen) == 1
    row, first, last, roles = seen[0]
    # The row's own roles (the row, its verdict) span the row; the shown ones only the verdict's cell.
    assert (row, first, last) == (1, 0, len(InstalledModelsModel.COLUMNS) - 1)
    assert set(roles) == {int(Display), int(Qt.ItemDataRole.ToolTipRole), int(Qt.ItemDataRole.DecorationRole),
                          int(Roles.ROW), int(Roles.VERDICT), int(Roles.SORT)}
    seen.clear()
    model.set_listing([installed("a"), installed("b", fit=fit("wont_fit", summary="Will not fit"))], 0)
    assert seen == []  # the same rows again: nothing announced


def test_installed_cells_say_what_matters(qtbot) -> None:
    model = InstalledModelsModel()
    checked(model)
    missing = installed("gone", model=dataclasses.replace(installed("gone").model, referenced=True, missing=True),
                        fit=None, details={})
    model.set_listing([installed("a", is_default=True, is_loaded=True), missing], 2_000)

    def text(row: int, name: str, role=Display):
        return model.index(row, model.COLUMNS.index(name)).data(role)

    assert [text(0, c) for c in model.COLUMNS] == ["A", "GGUF", "1.5B", "Q4_K_M", "1.5 GB", "Runs well",
                                                   "Default · Loaded"]
    assert "Longest context that fits: 32,768 tokens" in text(0, "Fits here", Qt.ItemDataRole.ToolTipRole)
    assert "weights 1.0 GB" in text(0, "Fits here", Qt.ItemDataRole.ToolTipRole)
    assert model.index(0, 0).data(Qt.ItemDataRole.FontRole).bold()
    assert text(1, "Status") == "Missing — reconnect the drive" and text(1, "Fits here") == "—"
    assert model.index(1, 3).data(Qt.ItemDataRole.ForegroundRole) is not None
    assert model.index(1, 0).data(Roles.MISSING) is True
    assert model.disk_total == 2_000 and model.referenced_total() == 0


def test_the_format_column_shows_the_format_the_library_kept(qtbot) -> None:
    # Not guessed from the path: a GGUF file may be named anything, and the disk is not asked.
    onnx = dataclasses.replace(installed("phi").model, path=Path("/m/phi"), format="onnx", missing=True)
    unnamed = dataclasses.replace(installed("blob").model, path=Path("/m/blob.bin"), format="gguf")
    model = InstalledModelsModel()
    checked(model)
    model.set_listing([installed("phi", model=onnx, details={}), installed("blob", model=unnamed, details={})], 0)
    assert [model.index(row, model.FORMAT).data() for row in range(2)] == ["ONNX", "GGUF"]


def test_catalog_rows_and_the_fits_filter(qtbot) -> None:
    model = CatalogModel()
    checked(model)
    proxy = ModelFilter()
    proxy.setSourceModel(model)
    checked(proxy)
    model.set_rows([catalog_row("small"), catalog_row("big", "wont_fit", size=None),
                    catalog_row("unknown", None, installed_id="unknown")])
    assert model.index(1, model.SIZE).data() == "size from the server"
    assert model.index(2, model.MODEL).data() == "Unknown (installed)"
    assert model.index(0, model.CONTEXT).data() == "32,768 tokens"
    proxy.set_fits_only(True)
    assert ids(proxy) == ["small", "unknown"]
    proxy.set_text("UNKN qwen")
    assert ids(proxy) == ["unknown"]
    proxy.set_text("")
    proxy.set_fits_only(False)
    assert ids(proxy) == ["small", "big", "unknown"]
    model.set_rows([catalog_row("big", "runs_slowly")])
    assert ids(proxy) == ["big"] and proxy.index(0, model.FITS).data() == "Runs slowly"


def test_proxy_sorts_sizes_as_numbers(qtbot) -> None:
    model = InstalledModelsModel()
    proxy = ModelFilter()
    proxy.setSourceModel(model)
    checked(proxy)
    small = installed("small", model=dataclasses.replace(installed("small").model, size=900_000_000))
    model.set_listing([installed("big"), small], 0)
    proxy.sort(model.SIZE, Qt.SortOrder.AscendingOrder)
    assert ids(proxy) == ["small", "big"]


def test_download_progress_updates_only_progress_roles(qtbot) -> None:
    model = DownloadsModel()
    checked(model)
    model.put(DownloadItem("1", "Qwen", "running", done=100, total=1000, bytes_per_second=2e6, seconds_left=200))
    model.put(DownloadItem("2", "Phi", "queued"))
    assert model.rowCount() == 2
    assert [model.index(0, c).data() for c in range(6)] == ["Qwen", "10% · 100 bytes of 1.0 KB", "2.0 MB/s",
                                                            "3 min 20 s", "Downloading", ""]
    seen: list[list[int]] = []
    model.dataChanged.connect(lambda tl, br, roles: seen.append([tl.row(), tl.column(), br.column(), *roles]))
    model.put(DownloadItem("1", "Qwen", "running", done=500, total=1000, bytes_per_second=2e6, seconds_left=200))
    assert len(seen) == 1 and seen[0][:3] == [0, 0, len(model.COLUMNS) - 1]
    assert set(seen[0][3:]) == {int(Display), int(Roles.ROW), int(Roles.FRACTION), int(Roles.SORT)}
    assert model.index(0, 0).data(Roles.FRACTION) == pytest.approx(0.5)
    model.put(DownloadItem("1", "Qwen", "paused", done=500, total=1000))
    assert model.index(0, model.STATE).data() == "Paused" and model.index(0, model.SPEED).data() == ""
    model.set_rows([DownloadItem("2", "Phi", "cancelled")])
    assert ids(model) == ["2"] and model.index(0, 0).data(Roles.STATE) == "cancelled"


def test_every_verdict_and_every_download_state_has_words() -> None:
    assert set(VERDICT_WORDS) == set(Verdict) == set(VERDICT_COLOURS) and all(VERDICT_WORDS.values())
    assert set(DOWNLOAD_STATE_WORDS) == set(DownloadState) and all(DOWNLOAD_STATE_WORDS.values())


@pytest.mark.parametrize(("seconds", "words"), [(0, "0 s"), (59.6, "1 min 0 s"), (3725, "1 h 2 min")])
def test_time_left_in_words(seconds, words) -> None:
    assert duration_text(seconds) == words


def test_parameters_from_the_label_or_the_count() -> None:
    assert parameters_text({"parameters_label": "270M", "parameters": 268_000_000}) == "270M"
    assert parameters_text({"parameters": 1_543_714_304}) == "1.54B"
    assert parameters_text({}) == "—"


def speedy(verdict: str, rate: float, measured: bool = False) -> FitEstimate:
    """A fit judged by speed, as the library service gives it (app.hardware.fit.with_speed)."""
    return with_speed(fit("runs_well"), SpeedEstimate(rate, "estimated: test", measured), comfortable=10.0)


def test_the_fit_column_says_the_speed_sorts_best_first_and_filters_what_runs_well(qtbot) -> None:
    model = CatalogModel()
    proxy = ModelFilter()
    proxy.setSourceModel(model)
    checked(proxy)
    model.set_rows([CatalogRow(entry("slow"), speedy("", 2.0), None), CatalogRow(entry("quick"), speedy("", 25.0), None),
                    catalog_row("huge", "wont_fit"), CatalogRow(entry("usable"), speedy("", 6.0, True), None),
                    catalog_row("unknown", None)])
    proxy.sort(model.FITS)
    assert ids(proxy) == ["quick", "usable", "slow", "huge", "unknown"]
    words = [proxy.index(r, model.FITS).data() for r in range(proxy.rowCount())]
    assert words[:3] == ["Runs well · about 25 tokens/s here (estimated)", "Usable · about 6 tokens/s here",
                         "Slow · about 2 tokens/s here (estimated)"]
    proxy.set_runs_well_only(True)
    assert ids(proxy) == ["quick", "unknown"]


def test_an_embedding_model_is_labelled_and_gets_no_chat_verdict(qtbot) -> None:
    """Issue 37: the embedding model sat among chat models with "Runs well"."""
    installed_model, catalog = InstalledModelsModel(), CatalogModel()
    embedder = installed("minilm", model=dataclasses.replace(installed("minilm").model,
                                                             purpose=ModelPurpose.EMBEDDING))
    installed_model.set_listing([embedder, installed("chat")], 0)
    catalog.set_rows([catalog_row("minilm", purpose=ModelPurpose.EMBEDDING, instruct=False)])
    for items in (installed_model, catalog):
        cell = items.index(0, items.FITS)
        assert cell.data() == "Embedding" and cell.data(Qt.ItemDataRole.DecorationRole) is None
        assert cell.data(Roles.VERDICT) is None and "answers no chat" in cell.data(Qt.ItemDataRole.ToolTipRole)
    assert installed_model.index(1, installed_model.FITS).data() == "Runs well"
