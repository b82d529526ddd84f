"""The macOS LaunchAgent, written to a temporary HOME: read back with plistlib, removed, a path with spaces
and "ü" kept as one argument, and a refusal said in words. (launchd itself is not here to load it.)"""

from __future__ import annotations

import plistlib
import sys
from pathlib import Path

import pytest

from app.core import autostart
from app.core.autostart import AutostartError, LaunchAgent
from app.core.autostart.launch_agent import LABEL, launch_agent_path

APP = "/Applications/Kestrel Büro.app/Contents/MacOS/Kestrel"


def test_write_read_back_and_remove(tmp_path: Path) -> None:
    entry = LaunchAgent(launch_agent_path(tmp_path))
    assert entry.path == tmp_path / "Library" / "LaunchAgents" / f"{LABEL}.plist"
    assert entry.enabled() is False
    entry.enable([APP, "--background"])
    agent = plistlib.loads(entry.path.read_bytes())
    assert agent["Label"] == LABEL and agent["RunAtLoad"] is True
    assert agent["ProgramArguments"] == [APP, "--background"]
    assert entry.enabled() is True
    entry.disable()
    assert not entry.path.exists() and entry.enabled() is False
    entry.disable()


def test_a_damaged_agent_is_not_enabled(tmp_path: Path) -> None:
    entry = LaunchAgent(tmp_path / "agent.plist")
    entry.path.write_bytes(b"<plist><dict><key>RunAtLoad")
    assert entry.enabled() is False


def test_a_folder_that_cannot_be_written_is_said_with_the_file(tmp_path: Path) -> None:
    (tmp_path / "Library").write_text("a file where the folder should be", encoding="utf-8")
    entry = LaunchAgent(launch_agent_path(tmp_path))
    with pytest.raises(AutostartError) as caught:
        entry.enable([APP, "--background"])
    assert str(entry.path) in str(caught.value) and "Login Items" in str(caught.value)


def test_enable_on_macos_uses_the_home_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setenv("HOME", str(tmp_path))
    autostart.enable()
    agent = plistlib.loads(launch_agent_path(tmp_path).read_bytes())
    assert agent["ProgramArguments"] == [sys.executable, "-m", "app", "--background"]
    autostart.disable()
    assert autostart.enabled() is False
