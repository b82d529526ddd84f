"""Projects end to end on the real 0.5B instruct model, greedy, as a person uses them from the command line: a project
whose instructions say "Always answer in French." makes a new chat in it answer in French, where a chat outside it
answers in English."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.starter, pytest.mark.slow]
QUESTION = "What is the capital of Italy?"
# Words of a French answer about Rome that an English one does not hold.
FRENCH = re.compile(r"\b(capitale|est|l'Italie|la|de)\b", re.IGNORECASE)


def _kestrel(*args: str) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, capture_output=True, text=True,
                            encoding="utf-8", timeout=300)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return result


def _answer(model: Path, *flags: str) -> str:
    result = _kestrel("chat", "--model", str(model), "--json", "--temperature", "0", "--max-tokens", "32",
                      "--no-memory", *flags, QUESTION)
    return "".join(line["text"] for line in map(json.loads, result.stdout.splitlines()) if line["type"] == "delta")


def test_a_projects_instructions_shape_a_new_chats_answer(starter_model: Path) -> None:
    english = _answer(starter_model)
    assert "Rome" in english and not FRENCH.search(english), f"the check can fail: {english!r}"
    _kestrel("projects", "add", "Français", "--instructions", "Always answer in French.")
    french = _answer(starter_model, "--project", "Français")
    assert "Rome" in french and FRENCH.search(french), french
    [chat] = json.loads(_kestrel("projects", "show", "Français", "--json").stdout)["chats"]
    assert chat["title"] != "New chat", "the chat was saved in the project and named by its first message"
