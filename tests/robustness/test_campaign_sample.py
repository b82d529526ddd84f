"""Issue 9's reliability and privacy campaign, as CI runs it: the seeded sample of
benchmarks/robustness.py (a few cases of every category, about 100 s on two cores)
meets every goal but its times (those the full campaign checks). The full campaign is one command, run by hand:

    .venv/bin/python benchmarks/robustness.py

Each category is one test here, so a failure names what broke (damaged GGUF files,
SIGKILL and the history, the network trace, ...) with every reason the campaign gave.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.robustness import CATEGORIES

ROOT = Path(__file__).resolve().parents[2]
# The sample's one run, below, takes about 100 s on two quiet cores; beside the rest of the suite on a slow
# host it took over 300 s (the suite's timeout per test), so its own limit is wider.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
# The sample is sized to take about 100 s on two cores: 56 cases. A sample grown past this count has grown
# past what CI should run. (Its time is not asserted: a time goal is the full campaign's to measure; in
# the sample a missed time goal is recorded in the case's over_time, not failed.)
SAMPLE_MOST_CASES = 60

# Defects of the app the campaign found and that are not fixed yet: (category, case) ->
# what goes wrong. Such a case may fail here (the test is marked xfail, with the reason);
# once it passes, the test fails until its line is taken out, so a fix is never lost.
# (The first ones it found, JSON nested 100,000 deep in settings.json, genai_config.json
# and tokenizer files, were fixed in 213015f.)
KNOWN_DEFECTS: dict[tuple[str, str], str] = {}


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("robustness") / "sample.json"
    env = {key: value for key, value in os.environ.items() if key != "KESTREL_HOME"}
    result = subprocess.run([sys.executable, "benchmarks/robustness.py", "--sample", "--json", str(out)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=840)
    assert out.exists(), result.stdout + result.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    report["printed"], report["exit"] = result.stdout, result.returncode
    return report


@pytest.mark.parametrize("category", list(CATEGORIES))
def test_the_category_meets_its_goals(sample: dict, category: str) -> None:
    [row] = [r for r in sample["categories"] if r["category"] == category]
    cases = [c for c in sample["cases"] if c["category"] == category]
    assert cases, f"the sample ran no case of {category}"
    if row["skipped"]:
        if os.environ.get("CI"):
            pytest.fail(f"{category} was skipped in CI: {row['skipped']}")
        pytest.skip(row["skipped"])
    failed = [c for c in cases if not c["passed"]]
    unexpected = [f"{c['name']}: {'; '.join(c['reasons'])}" for c in failed
                  if (category, c["name"]) not in KNOWN_DEFECTS]
    assert not unexpected, "\n".join(unexpected)
    fixed = [c["name"] for c in cases if c["passed"] and (category, c["name"]) in KNOWN_DEFECTS]
    assert not fixed, f"fixed, so take them out of KNOWN_DEFECTS: {fixed}"
    assert row["tracebacks"] == sum(c["traceback"] for c in failed)  # only known defects show one
    if failed:
        pytest.xfail("; ".join(KNOWN_DEFECTS[(category, c["name"])] for c in failed))


def test_the_sample_is_small_and_prints_its_table(sample: dict) -> None:
    assert sample["mode"] == "sample"
    assert len(sample["cases"]) <= SAMPLE_MOST_CASES, f"the sample has {len(sample['cases'])} cases"
    header = next(line for line in sample["printed"].splitlines() if line.startswith("category "))
    assert header.split()[:4] == ["category", "cases", "passed", "worst"]
    for category in CATEGORIES:
        assert any(line.startswith(category + " ") for line in sample["printed"].splitlines()), category
    # The command's status says whether every goal was met (known defects included).
    assert sample["exit"] == (0 if all(c["passed"] for c in sample["cases"]) else 1)
