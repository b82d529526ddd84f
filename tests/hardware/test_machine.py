"""The command runner: real child processes, timeouts, odd paths, and no console window on Windows."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import pytest

from app.hardware import machine as machine_module
from app.hardware.machine import Command, CommandFailed, CommandMissing, powershell, run_command


def python_command(name: str, code: str, timeout_s: float = 20.0) -> Command:
    return Command(name, (sys.executable, "-c", code), timeout_s)


def test_output_is_decoded_as_utf8() -> None:
    out = run_command(python_command("echo", "import sys; sys.stdout.buffer.write('Arc™ Grafik ü\\n'.encode())"))
    assert out == "Arc™ Grafik ü\n"


def test_program_in_a_folder_with_spaces_and_non_ascii(tmp_path: Path) -> None:
    folder = tmp_path / "Program Files ü" / "NVIDIA Corporation"
    folder.mkdir(parents=True)
    tool = folder / "fake smi.py"
    tool.write_text("import sys\nprint('RTX, 12282, 10, 560.94', sys.argv[1])\n", encoding="utf-8")
    out = run_command(Command("fake", (sys.executable, str(tool), "--query gpu=name"), 20.0))
    assert out.strip() == "RTX, 12282, 10, 560.94 --query gpu=name"


def test_missing_program() -> None:
    with pytest.raises(CommandMissing, match="is not installed"):
        run_command(Command("nvidia_smi", ("kestrel-no-such-tool-7f3a",)))


def test_failing_program_says_its_status_and_last_error_line() -> None:
    code = "import sys; print('NVIDIA-SMI has failed', file=sys.stderr); sys.exit(9)"
    with pytest.raises(CommandFailed, match="exited with status 9: NVIDIA-SMI has failed"):
        run_command(python_command("smi", code))


def test_a_program_that_hangs_is_given_up_on() -> None:
    with pytest.raises(CommandFailed, match="did not answer within 0.5 s"):
        run_command(python_command("hang", "import time; time.sleep(30)", timeout_s=0.5))


def test_no_console_window_on_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict = {}

    def fake_run(args, **kwargs):
        seen.update(kwargs, args=args)
        return subprocess.CompletedProcess(args, 0, b"[]", b"")

    monkeypatch.setattr(machine_module.sys, "platform", "win32")
    monkeypatch.setattr(subprocess, "CREATE_NO_WINDOW", 0x08000000, raising=False)
    monkeypatch.setattr(subprocess, "run", fake_run)
    assert run_command(powershell("probe", "Get-Date")) == "[]"
    assert seen["creationflags"] == 0x08000000
    assert seen["stdin"] is subprocess.DEVNULL and seen["timeout"] > 0
    assert "shell" not in seen


def test_powershell_script_travels_encoded() -> None:
    command = powershell("registry", "Get-ItemProperty -Path 'HKLM:\\Ünïcode path\\0*' | ConvertTo-Json")
    assert command.args[1:6] == ("-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass", "-EncodedCommand")
    script = base64.b64decode(command.args[6]).decode("utf-16-le")
    assert script.startswith("[Console]::OutputEncoding = [System.Text.Encoding]::UTF8\n")
    assert script.endswith("Get-ItemProperty -Path 'HKLM:\\Ünïcode path\\0*' | ConvertTo-Json")
    assert command.args[0].endswith("powershell.exe")
