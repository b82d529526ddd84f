"""Checks, from Linux, what can be checked of Kestrel's Windows ONNX package set.

Windows does not run here, so this answers three questions without it, for x64 PCs
(onnxruntime-directml) and ARM64 ones (onnxruntime-windowsml: there is no ARM64
onnxruntime-directml):

1. Do the Windows packages resolve together? `pip download` for win_amd64 and win_arm64,
   CPython 3.11, fetches every requirement pyproject.toml gives that platform (the
   windows-npu extra included; llama-cpp-python is built from source, so it is left out).
2. Does GenAI load that build's runtime? The wheels are opened: the runtime wheel must
   ship capi/onnxruntime.dll and DirectML.dll, and GenAI's loader must take
   onnxruntime.dll from the onnxruntime package's capi folder. (The runtime's Python
   module links ONNX Runtime statically, so GenAI gets a runtime, and a provider
   registry, of its own.)
3. Does GenAI run on that runtime's version? onnxruntime-directml stops at 1.24 while
   onnxruntime-genai 0.18 is built for 1.31. A scratch virtual environment gets the
   Linux onnxruntime of each runtime wheel's version and GenAI 0.18 without its version
   pin, and streams a few tokens from tests/fixtures/tiny-onnx.

    python3 scripts/check_windows_wheels.py [--keep DIR]

Prints one line per check and exits 1 if any fails. Needs the package registry; pip's
cache is used.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import tomllib
import venv
import zipfile
from pathlib import Path

try:
    from packaging.requirements import Requirement
except ImportError:  # a bare Python: pip carries its own copy
    from pip._vendor.packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
TINY_ONNX = ROOT / "tests" / "fixtures" / "tiny-onnx"
# Platform tag -> the marker environment of a Windows Python on that kind of PC.
PLATFORMS = {
    "win_amd64": {"sys_platform": "win32", "platform_system": "Windows", "platform_machine": "AMD64"},
    "win_arm64": {"sys_platform": "win32", "platform_system": "Windows", "platform_machine": "ARM64"},
}
# Built from source at install time: it has no wheels to download.
SOURCE_BUILT = ("llama-cpp-python",)


def windows_set(platform: str) -> list[Requirement]:
    """pyproject.toml's requirements and the windows-npu extra as they apply there."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = project["dependencies"] + project["optional-dependencies"]["windows-npu"]
    environment = {**PLATFORMS[platform], "python_version": "3.11", "extra": ""}
    chosen = []
    for line in declared:
        requirement = Requirement(line)
        if requirement.name not in SOURCE_BUILT and \
                (requirement.marker is None or requirement.marker.evaluate(environment)):
            chosen.append(requirement)
    return chosen


GENERATE = """
import sys, onnxruntime as ort, onnxruntime_genai as og
model = og.Model(sys.argv[1])
tokenizer = og.Tokenizer(model)
params = og.GeneratorParams(model)
params.set_search_options(max_length=64)
generator = og.Generator(model, params)
generator.append_tokens(tokenizer.encode("hello"))
count = 0
while not generator.is_done() and count < 8:
    generator.generate_next_token()
    count += 1
print(f"onnxruntime {ort.__version__} with onnxruntime-genai {og.__version__}: {count} tokens")
"""


def pip(*args: str, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    return subprocess.run([python, "-m", "pip", *args], capture_output=True, text=True)


def download(platform: str, requirements: list[Requirement], folder: Path) -> dict[str, Path]:
    """The platform's wheels by package name; exits when they do not resolve."""
    specs = [f"{requirement.name}{requirement.specifier}" for requirement in requirements]
    done = pip("download", "--only-binary=:all:", "--platform", platform, "--python-version", "3.11",
               "--implementation", "cp", "--abi", "cp311", "-d", str(folder), *specs)
    if done.returncode != 0:
        raise SystemExit(f"FAIL {platform} resolve: pip download failed:\n{done.stderr[-2000:]}")
    return {wheel.name.split("-")[0].replace("_", "-"): wheel for wheel in folder.glob("*.whl")}


def check_loader(runtime: str, wheels: dict[str, Path]) -> tuple[bool, str]:
    with zipfile.ZipFile(wheels[runtime]) as wheel:
        names = set(wheel.namelist())
    missing = {"onnxruntime/capi/onnxruntime.dll", "onnxruntime/capi/DirectML.dll"} - names
    if missing:
        return False, f"loader: {runtime} lacks {', '.join(sorted(missing))}"
    with zipfile.ZipFile(wheels["onnxruntime-genai-winml"]) as genai:
        loader = genai.read("onnxruntime_genai/_dll_directory.py").decode("utf-8")
    if not re.search(r'os\.path\.join\(ort_package_path, "capi", "onnxruntime\.dll"\)', loader):
        return False, "loader: onnxruntime-genai-winml no longer loads onnxruntime.dll from the onnxruntime package"
    return True, f"loader: GenAI loads onnxruntime/capi/onnxruntime.dll (with DirectML.dll) from {runtime}"


def check_runtime_version(version: str, scratch: Path) -> tuple[bool, str]:
    version = ".".join(version.split(".")[:3])  # onnxruntime-windowsml adds a build stamp
    env = scratch / f"venv-{version}"
    venv.EnvBuilder(with_pip=True).create(env)
    python = str(env / "bin" / "python")
    steps = (("install", "--only-binary=:all:", f"onnxruntime=={version}", "numpy"),
             ("install", "--only-binary=:all:", "--no-deps", "onnxruntime-genai==0.18.0"))
    for step in steps:
        done = pip(*step, python=python)
        if done.returncode != 0:
            return False, f"runtime: could not install {step[-1]}:\n{done.stderr[-1500:]}"
    run = subprocess.run([python, "-c", GENERATE, str(TINY_ONNX)], capture_output=True, text=True)
    if run.returncode != 0 or "tokens" not in run.stdout:
        return False, f"runtime: GenAI 0.18 did not run on onnxruntime {version}:\n{run.stderr[-1500:]}"
    fallback = [line for line in run.stderr.splitlines() if "API version" in line]
    note = f" (it asked for newer API versions first: {len(fallback)} notices)" if fallback else ""
    return True, f"runtime: {run.stdout.strip()}{note}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        scratch = args.keep or Path(temporary)
        scratch.mkdir(parents=True, exist_ok=True)
        results = []
        for platform in PLATFORMS:
            requirements = windows_set(platform)
            names = [requirement.name for requirement in requirements]
            runtimes = [name for name in names if name.startswith("onnxruntime") and "genai" not in name]
            if len(runtimes) != 1 or "onnxruntime-genai-winml" not in names:
                results.append(f"FAIL {platform} markers: pyproject.toml gives {names}")
                print(results[-1])
                continue
            wheels = download(platform, requirements, scratch / platform)
            versions = {name: wheels[name].name.split("-")[1] for name in names
                        if name.startswith(("onnxruntime", "windowsml"))}
            print(f"ok   {platform} resolve: all {len(names)} requirements but llama-cpp-python; "
                  + ", ".join(f"{n} {v}" for n, v in versions.items()))
            for ok, text in (check_loader(runtimes[0], wheels), check_runtime_version(versions[runtimes[0]], scratch)):
                results.append(f"{'ok  ' if ok else 'FAIL'} {platform} {text}")
                print(results[-1])
    return 1 if any(line.startswith("FAIL") for line in results) else 0


if __name__ == "__main__":
    sys.exit(main())
