"""Facts the docs state that the code decides: the exit statuses (README) and the test markers (CONTRIBUTING.md)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The modules that end a `kestrel` process: the entry point, the commands, and the window.
SOURCES = [ROOT / "app" / "__main__.py", *sorted((ROOT / "app" / "cli").glob("*.py"))]
WINDOW = ROOT / "app" / "ui" / "app.py"


def statuses_in_code() -> set[int]:
    """Every EXIT_* constant of the commands, and 1 if the window can end with it."""
    found = set()
    for source in SOURCES:
        text = source.read_text(encoding="utf-8")
        found.update(int(value) for value in re.findall(r"^EXIT_[A-Z_]+ = (\d+)", text, re.M))
    if re.search(r"^\s+return 1$", WINDOW.read_text(encoding="utf-8"), re.M):
        found.add(1)
    return found


def statuses_in_table(readme: str) -> set[int]:
    """The first column of the table under "**Exit status**"."""
    section = readme.split("**Exit status**", 1)[1]
    table = re.search(r"\n\|[^\n]*\n\| ---[^\n]*\n((?:\|[^\n]*\n)+)", section)
    assert table, "the README has no table after **Exit status**"
    return {int(row.split("|")[1]) for row in table.group(1).splitlines()}


def test_the_readme_lists_every_exit_status_and_no_other() -> None:
    code, table = statuses_in_code(), statuses_in_table((ROOT / "README.md").read_text(encoding="utf-8"))
    assert code == table, (f"in the code, not in the README's table: {sorted(code - table)}; "
                           f"in the table, not in the code: {sorted(table - code)}")


def test_a_missing_row_is_found() -> None:
    readme = "**Exit status**:\n\n| status | meaning |\n| --- | --- |\n| 0 | done |\n| 2 | bad usage |\n\nNext.\n"
    assert statuses_in_table(readme) == {0, 2}
    assert statuses_in_code() - statuses_in_table(readme)


def markers_declared() -> set[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {line.split(":", 1)[0].strip() for line in pyproject["tool"]["pytest"]["ini_options"]["markers"]}


def markers_unexplained(contributing: str) -> set[str]:
    """The declared markers that CONTRIBUTING.md's paragraph on markers does not name."""
    paragraph = contributing.split("**Markers**", 1)[1].split("\n\n", 1)[0]
    return {marker for marker in markers_declared() if f"`{marker}`" not in paragraph}


def test_contributing_explains_every_test_marker() -> None:
    missing = markers_unexplained((ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8"))
    assert not missing, f"CONTRIBUTING.md's **Markers** paragraph does not explain: {sorted(missing)}"


def test_a_marker_left_out_is_found() -> None:
    assert markers_unexplained("**Markers**: `slow` only.\n\nNext.") == markers_declared() - {"slow"}
