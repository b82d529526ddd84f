"""benchmarks/engine_send.py as CI runs it: a short sample (4 images of 1.5 MB, 3 runs) through
the script as it is run by hand, its table and its JSON; the send through the writer holds the
caller less than the direct write. docs/benchmarks.md has the figures of the full run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROWS = ("nothing sent (floor, 50 ms)", "conn.send (before)", "PipeWriter.send (after)",
        "EngineProcess.send, real engine (after)")


def test_the_sample_prints_and_writes_every_row(tmp_path: Path) -> None:
    out = tmp_path / "engine_send.json"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "engine_send.py"), "--images", "4",
                             "--runs", "3", "--json", str(out)], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    figures = json.loads(out.read_text())
    assert figures["images"] == 4 and figures["runs"] == 3
    assert figures["request_bytes"] > 4 * 1_500_000, "the images must be written whole, not once"
    assert tuple(figures["rows"]) == ROWS
    for label in ROWS:
        row = figures["rows"][label]
        assert label in result.stdout
        assert 0 < row["stall"]["p50_ms"] <= row["stall"]["max_ms"]
        if label != ROWS[0]:
            assert 0 < row["caller"]["p50_ms"] <= row["caller"]["max_ms"]
            assert row["answered"]["p50_ms"] >= row["caller"]["p50_ms"]
            assert row["stall"]["max_ms"] >= row["caller"]["max_ms"] - 0.01, "the send is part of the stall"
    before, after = figures["rows"][ROWS[1]]["caller"], figures["rows"][ROWS[2]]["caller"]
    assert after["p50_ms"] < before["p50_ms"], (before, after)
