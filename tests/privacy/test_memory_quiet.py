"""Memory never leaves the machine: adding, listing, using and forgetting memories opens no network socket (the
kernel's account, tests/helpers/syscalls.py), and the memory's text is written to the history file only."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.helpers.syscalls import run_traced
from tests.privacy.test_no_network import ROOT, app_env

FACT = "My passport number hint is Quokkaberry."


def _kestrel(home: Path, tmp_path: Path, *args: str):
    traced = run_traced([sys.executable, "-m", "app", *args], tmp_path, env=app_env(home), cwd=ROOT, timeout=180)
    assert traced.returncode == 0, traced.stderr
    return traced


def _holding(home: Path, text: str) -> list[str]:
    """The files under home whose bytes hold text."""
    return sorted(str(path.relative_to(home)) for path in home.rglob("*")
                  if path.is_file() and text.encode() in path.read_bytes())


def test_memories_are_kept_used_and_forgotten_without_a_socket(tmp_path: Path, kestrel_home: Path,
                                                               tiny_model: Path) -> None:
    added = _kestrel(kestrel_home, tmp_path, "memory", "add", FACT)
    listed = _kestrel(kestrel_home, tmp_path, "memory", "list", "--json")
    chat = _kestrel(kestrel_home, tmp_path, "chat", "--model", str(tiny_model), "--max-tokens", "4", "--save",
                    "What is my passport number hint?")
    assert FACT in listed.stdout
    assert _holding(kestrel_home, "Quokkaberry") == ["data/history.sqlite3"], "nowhere but the history file"
    removed = _kestrel(kestrel_home, tmp_path, "memory", "remove", "1")
    for traced in (added, listed, chat, removed):
        assert traced.network == [], traced.log
    assert _holding(kestrel_home, "Quokkaberry") == []
