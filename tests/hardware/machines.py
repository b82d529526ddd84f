"""A machine for the probe's sources in tests that replays a fixture folder (app.hardware.recording writes them).

A fixture folder holds what a machine answered:
  platform.json, psutil.json, onnxruntime.json, llama.json,
  windows_power_status.json, windows_processor_features.json   Python API answers
  commands/<name>.txt        a command's standard output (name: Command.name)
  commands/<name>.missing    the program was not installed (text: the message)
  commands/<name>.failed     the program failed (text: the message)
  files/<path>               a file the sources read, e.g. files/proc/cpuinfo
  listings.json              {"/sys/class/drm": [names]} for folders listed while recording
Anything absent reads as absent: a missing file raises FileNotFoundError, a missing
command CommandMissing, a missing API answer OSError.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.hardware.machine import Command, CommandFailed, CommandMissing

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hardware"


class RecordedMachine:
    """Replays a fixture folder; `overrides` replaces whole API answers for one test."""

    def __init__(self, folder: Path | str, **overrides: Any) -> None:
        self.folder = FIXTURES / folder if isinstance(folder, str) else folder
        self.overrides = overrides
        self.commands_run: list[str] = []

    def _api(self, name: str) -> Any:
        if name in self.overrides:
            value = self.overrides[name]
            if isinstance(value, Exception):
                raise value
            return value
        path = self.folder / f"{name}.json"
        if not path.exists():
            raise OSError(f"{name} was not recorded for {self.folder.name}")
        return json.loads(path.read_text(encoding="utf-8"))

    def platform(self) -> dict[str, str]:
        return self._api("platform")

    def run(self, command: Command) -> str:
        self.commands_run.append(command.name)
        base = self.folder / "commands" / command.name
        if base.with_suffix(".txt").exists():
            return base.with_suffix(".txt").read_text(encoding="utf-8")
        if base.with_suffix(".failed").exists():
            raise CommandFailed(base.with_suffix(".failed").read_text(encoding="utf-8").strip())
        message = base.with_suffix(".missing").read_text(encoding="utf-8").strip() \
            if base.with_suffix(".missing").exists() else f"{command.args[0]} is not installed"
        raise CommandMissing(message)

    def _file(self, path: str) -> Path:
        return self.folder / "files" / path.lstrip("/")

    def read_text(self, path: str) -> str:
        return self._file(path).read_text(encoding="utf-8")

    def list_dir(self, path: str) -> list[str]:
        listings = self.folder / "listings.json"
        if listings.exists():
            recorded = json.loads(listings.read_text(encoding="utf-8"))
            if path in recorded:
                return list(recorded[path])
        folder = self._file(path)
        if not folder.is_dir():
            raise FileNotFoundError(path)
        return sorted(entry.name for entry in folder.iterdir())

    def psutil_facts(self) -> dict[str, Any]:
        return self._api("psutil")

    def windows_power_status(self) -> dict[str, int]:
        return self._api("windows_power_status")

    def windows_processor_features(self) -> dict[str, bool]:
        return self._api("windows_processor_features")

    def onnxruntime(self, allow_downloads: bool) -> dict[str, Any]:
        return self._api("onnxruntime")

    def llama(self) -> dict[str, Any]:
        return self._api("llama")


def recorded_report(name: str):
    """The report the probe makes of a recorded machine; picklable by name for the engine."""
    from app.hardware.probe import probe

    return probe(RecordedMachine(name))
