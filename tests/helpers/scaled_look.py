"""A look script (Python that builds forms offscreen and prints {"looked": [...], "problems": [...]} as its last
line) run in a fresh process at 100% and 200% on a 1920×1080 laptop screen, each in a home of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCREEN = {"screens": [{"name": "laptop", "x": 0, "y": 0, "width": 1920, "height": 1080, "logicalDpi": 96,
                       "logicalBaseDpi": 96, "dpr": 1}]}


def problems_at_both_scales(tmp_path: Path, script: str, looks: int) -> list[str]:
    """What the script found cut, at each scale ("200%: …"); each run must have looked at `looks` forms."""
    config = tmp_path / "screen.json"
    config.write_text(json.dumps(SCREEN), encoding="utf-8")
    problems = []
    for scale in ("1", "2"):
        env = dict(os.environ, QT_SCALE_FACTOR=scale, QT_QPA_PLATFORM=f"offscreen:configfile={config}",
                   KESTREL_HOME=str(tmp_path / f"home {scale}"))
        done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        found = json.loads(done.stdout.strip().splitlines()[-1])
        assert len(found["looked"]) == looks, found
        problems += [f"{int(scale) * 100}%: {problem}" for problem in found["problems"]]
    return problems
