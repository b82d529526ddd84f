"""scripts/test.py: a second lane of commands beside the rest, its output whole after the rest's, every status kept."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _runner():
    spec = importlib.util.spec_from_file_location("suite_runner", ROOT / "scripts" / "test.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_kept_output_follows_the_shown_output_whole_and_both_statuses_come_back(
        capfd: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    started = tmp_path / "kept started"
    # The lane's first command writes its first line before the shown one finishes: they ran at the same
    # time; its second command runs after its first.
    kept = [sys.executable, "-c", "import pathlib, sys, time; print('kept 1', flush=True); "
            f"pathlib.Path({str(started)!r}).touch(); time.sleep(0.2); print('kept 2'); sys.exit(3)"]
    then = [sys.executable, "-c", "print('after kept')"]
    shown = [sys.executable, "-c", "import pathlib, time\n"
             f"while not pathlib.Path({str(started)!r}).exists(): time.sleep(0.01)\n"
             "print('shown', flush=True)"]

    statuses = _runner().side_by_side(shown, [kept, then])

    out = capfd.readouterr().out
    assert statuses == [0, 3, 0]
    assert out.index("shown") < out.index("kept 1") < out.index("kept 2") < out.index("after kept")


def test_a_failure_in_either_process_fails_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = _runner()
    monkeypatch.setattr(runner, "side_by_side", lambda shown, kept: [0, 0, 1])
    assert runner.main([]) == 1
    monkeypatch.setattr(runner, "side_by_side", lambda shown, kept: [runner.NO_TESTS, 0, 0])
    assert runner.main([]) == 0
    monkeypatch.setattr(runner, "side_by_side", lambda shown, kept: [2, 0, 0])
    assert runner.main([]) == 2


def test_every_test_folder_runs_in_exactly_one_lane(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = _runner()
    seen: list = []
    monkeypatch.setattr(runner, "side_by_side", lambda shown, kept: seen.extend([shown, *kept]) or [0, 0, 0])
    runner.main([])
    rest, window, long_units = seen
    ignored = {arg.removeprefix("--ignore=") for arg in rest if arg.startswith("--ignore=")}
    assert ignored == {"tests/ui", *runner.SECOND_LANE}
    assert "tests/ui" in window and all(folder in long_units for folder in runner.SECOND_LANE)
    assert all((ROOT / folder).exists() for folder in runner.SECOND_LANE)
