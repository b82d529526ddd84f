"""Two Kestrels setting up the starter model at once (a window and a `chat` on first run).

Before the lock, both wrote the same `.partial` file: one failed with a traceback or the
window hung on "Setting up the starter model…".
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.library.starter import STARTER_BYTES, STARTER_SHA256, starter_available

ROOT = Path(__file__).resolve().parents[2]
INSTALL = """
import json, sys
from pathlib import Path
from app.library.models import ModelLibrary
from app.library.starter import install_starter
waited = []
model = install_starter(ModelLibrary(Path(sys.argv[1])), waiting=lambda: waited.append(1))
print(json.dumps({"path": str(model.path), "sha256": model.sha256, "waited": bool(waited)}))
"""


@pytest.mark.starter
def test_two_processes_install_the_starter_once_and_both_get_it(tmp_path: Path) -> None:
    if not starter_available():
        pytest.skip("the starter's chunk packages (the starter extra) are not installed")
    models = tmp_path / "models"
    runs = [subprocess.Popen([sys.executable, "-c", INSTALL, str(models)], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [run.communicate(timeout=300) for run in runs]
    for run, (out, err) in zip(runs, results):
        assert run.returncode == 0, err
        assert "Traceback" not in err
    reports = [json.loads(out) for out, _ in results]
    assert reports[0]["path"] == reports[1]["path"]
    assert {r["sha256"] for r in reports} == {STARTER_SHA256}
    assert [r["waited"] for r in reports].count(True) == 1, "one assembled it, the other waited"
    assert list(models.rglob("*.partial")) == []
    assert Path(reports[0]["path"]).stat().st_size == STARTER_BYTES
