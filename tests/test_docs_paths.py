"""Every repository path the README, CONTRIBUTING.md, docs/*.md and pyproject.toml name exists."""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "pyproject.toml",
                    *(ROOT / "docs").glob("*.md")])
# A run of path characters; backslashes are Windows spellings of the same paths.
_TOKEN = re.compile(r"[\w.\-/\\*<>…]+")
# `dist/Kestrel-<version>-setup.exe`, `tests/library/test_download*`: a placeholder or a
# wildcard names the files that match it.
_PLACEHOLDER = re.compile(r"<[^<>/]*>|…")


def _ignore_patterns() -> list[str]:
    lines = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith(("#", "!"))]


def _ignored(path: str, patterns: list[str]) -> bool:
    """Whether git ignores `path` (an output such as dist/ or .venv/), for the pattern forms
    .gitignore uses: `name/` anywhere, `a/b/` from the root, `*.ext`."""
    parts = path.strip("/").split("/")
    for pattern in patterns:
        body = pattern.strip("/")
        if "/" in body:  # anchored at the root
            if path.strip("/") == body or path.startswith(body + "/"):
                return True
        elif any(fnmatch.fnmatchcase(part, body) for part in parts):
            return True
    return False


def _top_level(patterns: list[str]) -> set[str]:
    """The repository's own top-level names: what a path must start with to be one."""
    return {entry.name for entry in ROOT.iterdir() if entry.name != ".git" and not _ignored(entry.name, patterns)}


def _markdown_names(patterns: list[str]) -> set[str]:
    """The names of the repository's Markdown files, wherever they are."""
    names = set()
    for folder, subfolders, files in os.walk(ROOT):
        here = Path(folder).relative_to(ROOT).as_posix()
        subfolders[:] = [name for name in subfolders if name != ".git"
                         and not _ignored(name if here == "." else f"{here}/{name}", patterns)]
        names.update(name for name in files if name.endswith(".md"))
    return names


def missing_paths(text: str, folder: Path = ROOT) -> list[str]:
    """The repository paths `text` names that are not there.

    A word is a repository path when its first part is one of the repository's top-level
    names (`app/ui/common/theme.py`, `scripts\\dev.py`, `docs/`), when it leads out of `folder`
    (`../shared/x`), or when it is a Markdown file name (`ARCHITECTURE.md`). It must exist
    or be an output git ignores; a bare Markdown name must be the name of one of the
    repository's Markdown files (`SOURCES.md`, of tests/fixtures/chat_templates/).
    """
    patterns = _ignore_patterns()
    top = _top_level(patterns)
    markdown = _markdown_names(patterns)
    missing = []
    for token in _TOKEN.findall(text):
        word = token.replace("\\", "/").rstrip(".,:;")
        if word.startswith("./"):
            word = word[2:]
        if "/" not in word:
            if re.fullmatch(r"[\w.-]+\.md", word) and word not in markdown:
                missing.append(word)
            continue
        first = word.split("/")[0]
        if first == "..":
            target = (folder / word).resolve()
            if not target.is_relative_to(ROOT) or not _exists(target.relative_to(ROOT).as_posix()):
                missing.append(word)
            continue
        if first not in top or _ignored(word, patterns):
            continue
        if not _exists(word):
            missing.append(word)
    return sorted(set(missing))


def _exists(path: str) -> bool:
    pattern = _PLACEHOLDER.sub("*", path.rstrip("/"))
    if "*" in pattern or "?" in pattern:
        return any(ROOT.glob(pattern))
    return (ROOT / pattern).exists()


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_path_a_document_names_exists(document: Path) -> None:
    assert document.is_file()
    missing = missing_paths(document.read_text(encoding="utf-8"), document.parent)
    assert not missing, f"{document.relative_to(ROOT)} names paths that are not in the repository: {missing}"


def test_a_made_up_path_is_found() -> None:
    sample = """Start with `scripts/dev.py`, then read [the notes](docs/design.md) and
    `app/ui/no_such_module.py`; the layering is in ARCHITECTURE.md, and see
    ../shared/models/get-instruct-model or scripts\\no_such_script.py."""
    assert missing_paths(sample) == ["../shared/models/get-instruct-model", "ARCHITECTURE.md",
                                     "app/ui/no_such_module.py", "scripts/no_such_script.py"]


def test_outputs_placeholders_and_words_that_are_not_paths_pass() -> None:
    sample = """`dist/Kestrel-<version>-setup.exe`, `.venv/bin/kestrel`, `benchmarks/results/api.json`,
    `tests/library/test_download*`, `%LOCALAPPDATA%\\Kestrel`, input/output, owner/name, `</think>`,
    [the design](docs/design.md#layers), `tests/frozen/`."""
    assert missing_paths(sample) == []


def test_a_link_from_docs_is_read_from_its_folder() -> None:
    assert missing_paths("[up](../README.md) [gone](../NOWHERE.md)", ROOT / "docs") == ["../NOWHERE.md"]
