"""Speed verdicts in the library service: calibrated by threads.json, steady, with what other programs use."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import psutil
from gguf import GGUFWriter, LlamaFileType

from app.core.settings import DevicePreference
from app.hardware.fit import Verdict
from app.hardware.speed import Measured
from app.service import events as ev
from app.service.library.speed_judge import file_fit, measured_from, measured_speeds, read_bytes, with_reads
from tests.hardware.machines import recorded_report
from tests.service.conftest import run, session_of

CPUS = f"{os.cpu_count()}|{psutil.cpu_count(logical=False)}"


def test_a_measured_model_whose_file_is_here_is_weighed_by_what_its_tokens_read(tiny_model: Path,
                                                                                 tmp_path: Path) -> None:
    size = tiny_model.stat().st_size
    measured = (Measured(tiny_model.name, size, 5000.0, 1), Measured(tiny_model.name, size + 1, 5000.0, 1),
                Measured("gone.gguf", 10, 1.0, 1))
    weighed = with_reads(measured, [tiny_model, tmp_path / "not-there.gguf"])
    # The tiny model's embedding table is part of its file but not of what a token reads.
    assert 0 < weighed[0].read_bytes < size and weighed[0].read_bytes == read_bytes(tiny_model)
    assert weighed[1].read_bytes == 0 and weighed[2].read_bytes == 0  # another size: another file
    assert read_bytes(tmp_path / "not-there.gguf") == 0


def test_threads_json_gives_this_cpus_measurements_only(tmp_path) -> None:
    data = {f"starter.gguf|491400064|{CPUS}": {"best": {"1": 29.6, "2": 41.0}, "step_down": None},
            "other.gguf|1000|64|32": {"best": {"8": 99.0}},  # another machine's key: left out
            "broken": {"best": {"1": 5.0}}, f"bad.gguf|x|{CPUS}": {"best": {"1": 5.0}},
            f"zero.gguf|10|{CPUS}": {"best": {"1": 0, "two": 3.0}}}
    path = tmp_path / "threads.json"
    path.write_text(json.dumps(data), encoding="utf-8")

    found = measured_speeds(path)

    assert sorted((m.name, m.model_bytes, m.tokens_per_s, m.threads) for m in found) == [
        ("starter.gguf", 491400064, 29.6, 1), ("starter.gguf", 491400064, 41.0, 2)]
    assert measured_speeds(tmp_path / "none.json") == () and measured_speeds(None) == ()
    path.write_text("{not json", encoding="utf-8")
    assert measured_speeds(path) == ()
    assert measured_from({"a|1|2|2": {"best": {"1": 3.0}}}, 2, 2)[0].threads == 1


def test_the_library_judges_by_speed_calibrated_by_what_this_machine_measured(started_service) -> None:
    """An answer's speed, as the thread advisor records it, becomes the basis of every
    chat model's verdict; the tiny model runs well and says it was measured."""
    async def scenario():
        async with started_service() as started:
            first = started.service
            await first.library.refresh()
            size = next(r for r in first.library.rows if r.model.id == "tiny-model").model.size
            # What answers teach the thread advisor (kept in threads.json at the next save). The tiny model is
            # too small to calibrate on; a 500 MB model at 25 tokens/s on 1 thread is.
            advisor = session_of(first).threads
            advisor.record(f"tiny model.gguf|{size}|{CPUS}", 1, 100, 1000.0)
            advisor.record(f"big.gguf|500000000|{CPUS}", 1, 100, 25.0)
            await first.library.refresh()
            return started.events

    events = run(scenario)
    tiny = next(r for r in events.of(ev.LibraryListed)[-1].rows if r.model.id == "tiny-model").fit
    assert tiny is not None and tiny.verdict == Verdict.RUNS_WELL and tiny.speed is not None
    assert tiny.speed.measured and tiny.summary.startswith("Runs well: about ") and "/s here" in tiny.summary
    assert any(line.startswith("Other programs use ") for line in tiny.lines)
    catalog = {r.entry.id: r.fit for r in events.of(ev.CatalogListed)[-1].rows}
    big = catalog["qwen3-14b-q4_k_m"]
    assert big is not None and big.speed is not None and big.speed.measured
    assert "measured: big.gguf decoded at 25.0 tokens/s on 1 thread here" in big.speed.basis
    embedding = catalog["all-minilm-l6-v2-q8_0"]
    assert embedding is not None and embedding.speed is None, "an embedding model gets no chat speed"


FOURTEEN_B = 9_000_000_000  # a 14B model's Q4_K_M file, as Qwen3 14B's is about


def sparse_14b(path: Path, label: str = "14B") -> Path:
    """A GGUF header with Qwen3 14B's shape (40 layers, 40 heads of which 8 for keys and values, 5,120 wide)
    whose 9 GB of weights are a sparse hole: the file states its full size without using the disk."""
    writer = GGUFWriter(str(path), "qwen3")
    writer.add_name("Fourteen")
    writer.add_size_label(label)
    writer.add_file_type(LlamaFileType.MOSTLY_Q4_K_M)
    writer.add_block_count(40)
    writer.add_context_length(40960)
    writer.add_embedding_length(5120)
    writer.add_head_count(40)
    writer.add_head_count_kv(8)
    writer.add_tensor_info("token_embd.weight", (FOURTEEN_B // 4,), np.dtype(np.float32), FOURTEEN_B)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    data_start = -(-path.stat().st_size // 32) * 32  # tensor data starts aligned
    os.truncate(path, data_start + FOURTEEN_B)
    return path


def test_a_14b_file_is_slow_on_a_recorded_2_core_machine_though_its_memory_says_runs_well(tmp_path) -> None:
    """Issue 37: a model file's verdict (the window's installed models, `models info`) is its speed. On
    the recorded 2-core VM a 9 GB 14B model fits the memory, and decodes at about 3 tokens/s: slow."""
    vm = recorded_report("linux_vm")
    path = sparse_14b(tmp_path / "fourteen.gguf")

    fit = file_fit(vm, path, 4096, DevicePreference.AUTO, chat=True, parameters="14B", comfortable=10.0)
    memory_only = file_fit(vm, path, 4096, DevicePreference.AUTO, chat=False, parameters="14B", comfortable=10.0)

    assert memory_only is not None and memory_only.verdict == Verdict.RUNS_WELL and memory_only.speed is None
    assert fit is not None and fit.speed is not None
    assert fit.verdict == Verdict.RUNS_SLOWLY, fit.summary
    assert fit.summary == "Slow: about 3 tokens/s here (estimated), slow for chat"
    assert fit.need.kv_cache > 0, "the shape read from the header counts the cache"
    assert file_fit(vm, tmp_path / "none.gguf", 4096, DevicePreference.AUTO, chat=True, parameters="",
                    comfortable=10.0) is None


def test_a_file_is_judged_with_this_machines_measurements(tmp_path) -> None:
    vm = recorded_report("linux_vm")
    path = sparse_14b(tmp_path / "fourteen.gguf")
    # Measured here: a 500 MB model at 100 tokens/s on 2 threads, four times the estimate's rate.
    fast = (Measured("small.gguf", 500_000_000, 100.0, 2),)

    fit = file_fit(vm, path, 4096, DevicePreference.AUTO, chat=True, parameters="14B", comfortable=10.0,
                   measured=fast)

    assert fit is not None and fit.speed is not None and fit.speed.measured
    assert fit.verdict == Verdict.USABLE and fit.summary.startswith("Usable: about 6 tokens/s here, below the 10")
    assert "How it was judged: measured: small.gguf decoded at 100.0 tokens/s on 2 threads here" in fit.lines
