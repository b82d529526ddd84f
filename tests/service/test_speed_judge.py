"""Speed verdicts in the library service: calibrated by threads.json, steady, with what other programs use."""

from __future__ import annotations

import json
import os

import psutil

from app.hardware.fit import Verdict
from app.service import events as ev
from app.service.library.speed_judge import measured_from, measured_speeds
from tests.service.conftest import run, session_of

CPUS = f"{os.cpu_count()}|{psutil.cpu_count(logical=False)}"


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
