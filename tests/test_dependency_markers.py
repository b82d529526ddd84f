"""pyproject.toml's environment markers give every platform one ONNX Runtime and its GenAI.

Two packages of the onnxruntime family in one environment overwrite each other's files,
and a platform with none cannot run ONNX models; scripts/check_windows_wheels.py checks
that the Windows sets also resolve and run (it needs the package registry).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"

MACHINES = {
    "linux x86_64": ({"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64"},
                     "onnxruntime", "onnxruntime-genai"),
    "macOS Apple silicon": ({"sys_platform": "darwin", "platform_system": "Darwin", "platform_machine": "arm64"},
                            "onnxruntime", "onnxruntime-genai"),
    "Windows x64": ({"sys_platform": "win32", "platform_system": "Windows", "platform_machine": "AMD64"},
                    "onnxruntime-directml", "onnxruntime-genai-winml"),
    # Snapdragon PCs: onnxruntime-directml publishes no win_arm64 wheels.
    "Windows ARM64": ({"sys_platform": "win32", "platform_system": "Windows", "platform_machine": "ARM64"},
                      "onnxruntime-windowsml", "onnxruntime-genai-winml"),
}


def onnx_packages(environment: dict[str, str], extra: str = "") -> list[str]:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    lines = project["dependencies"] + [line for lines in project["optional-dependencies"].values() for line in lines]
    names = []
    for line in lines:
        requirement = Requirement(line)
        if requirement.name.startswith("onnxruntime") and (
                requirement.marker is None
                or requirement.marker.evaluate({**environment, "python_version": "3.11", "extra": extra})):
            names.append(requirement.name)
    return names


@pytest.mark.parametrize("machine", MACHINES)
def test_each_platform_gets_one_runtime_and_its_genai(machine: str) -> None:
    environment, runtime, genai = MACHINES[machine]
    assert sorted(onnx_packages(environment)) == sorted([runtime, genai])


def test_the_windows_npu_extra_adds_the_catalog_on_windows_only() -> None:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    [line] = project["optional-dependencies"]["windows-npu"]
    marker = Requirement(line).marker
    for machine, (environment, _, _) in MACHINES.items():
        applies = marker.evaluate({**environment, "python_version": "3.11", "extra": "windows-npu"})
        assert applies == machine.startswith("Windows"), machine
