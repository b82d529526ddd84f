"""Windows' speech on a machine that is not Windows: PyWinRT's stand-in (tests/helpers/fake_winrt) first on the path
for this process and the synthesis children it spawns, answering with the voices of
tests/fixtures/windows_voices/voices.json (its README says where they were seen), and Kestrel told it runs on
Windows. What the stand-in was asked is read back from its log."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import app.voice.synthesis.windows_voices as windows_voices

HERE = Path(__file__).resolve().parent
FAKE_WINRT = HERE / "fake_winrt"
VOICES = json.loads((HERE.parent / "fixtures" / "windows_voices" / "voices.json").read_text(encoding="utf-8"))["voices"]
IDS = {voice["display_name"].removeprefix("Microsoft ").lower(): voice["id"] for voice in VOICES}
# The rate each voice's streams carry (not known for real Windows since 1803: see the fixture's README).
RATES = {IDS["david"]: 16_000, IDS["zira"]: 22_050, IDS["mark"]: 24_000, IDS["irina"]: 24_000, IDS["pavel"]: 16_000}


@dataclass
class FakeWindows:
    config_file: Path
    log_file: Path

    def configure(self, **changes: Any) -> None:
        """Change what the stand-in answers (voices, default, rates, fail), from the next call on."""
        data = json.loads(self.config_file.read_text(encoding="utf-8"))
        data.update(changes)
        self.config_file.write_text(json.dumps(data), encoding="utf-8")
        windows_voices._listed = None  # the list is read again, not the half minute's copy

    def asked(self) -> list[dict[str, Any]]:
        """Each utterance the stand-in was asked to say: voice (its Id), text, rate, appended_silence."""
        if not self.log_file.exists():
            return []
        return [json.loads(line) for line in self.log_file.read_text(encoding="utf-8").splitlines()]


def fake_windows(monkeypatch: pytest.MonkeyPatch, folder: Path, default: str = "zira") -> FakeWindows:
    """Kestrel on "Windows" with the stand-in, until the test ends (monkeypatch undoes it)."""
    fake = FakeWindows(folder / "fake_winrt.json", folder / "fake_winrt.log")
    fake.config_file.write_text(json.dumps({"voices": VOICES, "default": IDS[default], "rates": RATES,
                                            "fail": {}, "log": str(fake.log_file)}), encoding="utf-8")
    monkeypatch.syspath_prepend(str(FAKE_WINRT))
    monkeypatch.setenv("KESTREL_FAKE_WINRT", str(fake.config_file))
    monkeypatch.setattr(windows_voices, "ON_WINDOWS", True)
    monkeypatch.setattr(windows_voices, "_listed", None)
    # A cache of its own: the module's would keep "PyWinRT is here" after the stand-in leaves the path.
    monkeypatch.setattr(windows_voices, "_module_here", functools.cache(windows_voices._module_here.__wrapped__))
    return fake
