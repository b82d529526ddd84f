"""Recording a machine: every answer the probe's sources get, written into a folder.

`python -m app doctor --record FOLDER` uses this, so anyone with Kestrel can record their
PC; tests/hardware/machines.py (`RecordedMachine`) replays such a folder, and its
docstring describes the layout. A recording holds what the tools print about the
hardware, drivers and runtimes, and nothing of the user's: no host name, no user name,
no files beyond /proc/cpuinfo, /etc/os-release and the /sys files of GPUs and NPUs.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from app.hardware.machine import Command, CommandFailed, CommandMissing, LiveMachine


class RecordingMachine(LiveMachine):
    """The live machine, writing every answer into a folder as it goes.

    The probe asks several sources at once, from threads: writes are serialised.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.listings: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def _save(self, name: str, value: Any) -> Any:
        with self._lock:
            self._write(name, value)
        return value

    def _write(self, name: str, value: Any) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / f"{name}.json").write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")

    def platform(self) -> dict[str, str]:
        return self._save("platform", super().platform())

    def run(self, command: Command) -> str:
        base = self.folder / "commands" / command.name
        base.parent.mkdir(parents=True, exist_ok=True)
        try:
            output = super().run(command)
        except CommandMissing as exc:
            base.with_suffix(".missing").write_text(f"{exc}\n", encoding="utf-8")
            raise
        except CommandFailed as exc:
            base.with_suffix(".failed").write_text(f"{exc}\n", encoding="utf-8")
            raise
        base.with_suffix(".txt").write_text(output, encoding="utf-8")
        return output

    def read_text(self, path: str) -> str:
        text = super().read_text(path)
        target = self.folder / "files" / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        return text

    def list_dir(self, path: str) -> list[str]:
        names = super().list_dir(path)
        with self._lock:
            self.listings[path] = names
            self._write("listings", self.listings)
        return names

    def psutil_facts(self) -> dict[str, Any]:
        return self._save("psutil", super().psutil_facts())

    def windows_power_status(self) -> dict[str, int]:
        return self._save("windows_power_status", super().windows_power_status())

    def windows_processor_features(self) -> dict[str, bool]:
        return self._save("windows_processor_features", super().windows_processor_features())

    def onnxruntime(self, allow_downloads: bool) -> dict[str, Any]:
        return self._save("onnxruntime", super().onnxruntime(allow_downloads))

    def llama(self) -> dict[str, Any]:
        return self._save("llama", super().llama())
