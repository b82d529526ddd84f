"""`doctor` as a user runs it: a real process, exit status 0, JSON with stable keys, a readable table."""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import doctor
from app.hardware.machine import CommandFailed
from app.hardware.probe import probe
from tests.hardware.machines import RecordedMachine

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"os", "cpu", "ram", "gpus", "npus", "ep_devices", "llama", "power", "errors", "mcp_containment"}
# Until app/__main__.py wires the subcommand, the tests build the same parser doctor.add_parser builds.
_RUN_DOCTOR = ("import argparse, sys; from app.cli import doctor; parser = argparse.ArgumentParser(); "
               "doctor.add_parser(parser.add_subparsers(dest='command')); args = parser.parse_args(sys.argv[1:]); "
               "sys.exit(args.run(args))")


def run_doctor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _RUN_DOCTOR, "doctor", *args], cwd=ROOT, capture_output=True,
                          text=True, encoding="utf-8", timeout=120)


def test_json_in_a_real_process() -> None:
    result = run_doctor("--json")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    data = json.loads(result.stdout)
    assert KEYS <= set(data)
    assert data["cpu"]["threads"] >= 1 and data["ram"]["total"] > 0
    assert isinstance(data["errors"], list)
    # Issue 35, item 14: how far Kestrel can end what its MCP servers start, said where a person looks.
    assert "MCP server" in data["mcp_containment"]


def test_table_in_a_real_process() -> None:
    result = run_doctor()
    assert result.returncode == 0, result.stderr
    for label in ("System", "CPU", "RAM", "GPUs", "NPUs", "ONNX Runtime", "llama.cpp", "Power", "Problems"):
        assert any(line.startswith(label) for line in result.stdout.splitlines()), label


def test_python_m_app_doctor_json() -> None:
    result = subprocess.run([sys.executable, "-m", "app", "doctor", "--json"], cwd=ROOT, capture_output=True,
                            text=True, encoding="utf-8", timeout=120)
    assert result.returncode == 0, result.stderr
    assert KEYS <= set(json.loads(result.stdout))


class BrokenWmi(RecordedMachine):
    def run(self, command):
        if command.name == "win32_videocontroller":
            raise CommandFailed("powershell.exe did not answer within 20 s")
        return super().run(command)


def args_for(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    doctor.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["doctor", *argv])


def test_exit_status_is_zero_when_a_source_fails(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(doctor, "probe", functools.partial(probe, BrokenWmi("windows_laptop_npu")))
    args = args_for("--json")
    assert args.run(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["errors"] == [{"source": "gpus", "message": "powershell.exe did not answer within 20 s"}]
    assert data["npus"][0]["name"] == "Intel(R) AI Boost"


def test_table_of_the_desktop(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(doctor, "probe", functools.partial(probe, RecordedMachine("windows_desktop_rtx4070")))
    args = args_for()
    assert args.run(args) == 0
    out = capsys.readouterr().out
    assert "NVIDIA GeForce RTX 4070 (NVIDIA, discrete): 12.0 GB dedicated, 10.8 GB free" in out
    assert "GPU offload yes; backends CUDA, CPU" in out
    assert "no battery" in out
    report, mcp, servers = out.rstrip().rsplit("\n\n", 2)
    assert report.endswith("Problems      none")
    assert mcp.startswith("MCP servers: ")
    assert servers == "Servers you added: none. Nothing is contacted."


def test_table_lists_problems() -> None:
    text = doctor.format_report(probe(BrokenWmi("windows_laptop_npu")))
    assert "Problems      gpus: powershell.exe did not answer within 20 s" in text
    assert "GPUs          none found" in text


def test_record_writes_a_folder_that_replays_as_this_machine(tmp_path) -> None:
    folder = tmp_path / "my pc — Zoë"  # spaces and non-ASCII, as Windows user folders have
    result = run_doctor("--json", "--record", str(folder))
    assert result.returncode == 0, result.stderr
    assert f"Recorded what each source answered into {folder}" in result.stderr
    live = json.loads(result.stdout)
    replayed = probe(RecordedMachine(folder)).to_dict()
    for key in ("os", "cpu", "gpus", "npus", "ep_devices", "llama"):
        assert replayed[key] == live[key], key
    assert replayed["ram"]["total"] == live["ram"]["total"]
    recorded = {path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()}
    assert {"platform.json", "psutil.json", "onnxruntime.json", "llama.json"} <= recorded


def test_record_refuses_a_folder_with_files_in_it(tmp_path) -> None:
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    result = run_doctor("--record", str(tmp_path))
    assert result.returncode == 2
    assert "is not an empty folder" in result.stderr
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
