"""Checks, from Linux, what can be checked of Kestrel's Windows ONNX package set.

Windows does not run here, so this answers three questions without it:

1. Do the Windows packages resolve together? `pip download` for win_amd64 / CPython 3.11
   fetches onnxruntime-directml, onnxruntime-genai-winml and windowsml as pyproject.toml
   declares them.
2. Does GenAI load the DirectML build's runtime? The wheels are opened: the DirectML
   wheel must ship capi/onnxruntime.dll (its Python module links ONNX Runtime statically,
   so GenAI gets a runtime, and a provider registry, of its own), and GenAI's loader
   must take onnxruntime.dll from the onnxruntime package's capi folder.
3. Does GenAI run on that older runtime? onnxruntime-directml stops at 1.24 while
   onnxruntime-genai 0.18 is built for 1.31. A scratch virtual environment gets the
   Linux onnxruntime of the DirectML wheel's version and GenAI 0.18 without its
   version pin, and streams a few tokens from tests/fixtures/tiny-onnx.

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
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TINY_ONNX = ROOT / "tests" / "fixtures" / "tiny-onnx"
WINDOWS_SET = ("onnxruntime-directml>=1.24", "onnxruntime-genai-winml==0.18.0", "windowsml")

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


def download_windows_set(folder: Path) -> dict[str, Path]:
    done = pip("download", "--only-binary=:all:", "--platform", "win_amd64", "--python-version", "3.11",
               "--implementation", "cp", "--abi", "cp311", "-d", str(folder), *WINDOWS_SET)
    if done.returncode != 0:
        raise SystemExit(f"FAIL resolve: pip download for win_amd64 failed:\n{done.stderr[-2000:]}")
    wheels = {}
    for wheel in folder.glob("*.whl"):
        wheels[wheel.name.split("-")[0].replace("_", "-")] = wheel
    return wheels


def check_loader(wheels: dict[str, Path]) -> str:
    with zipfile.ZipFile(wheels["onnxruntime-directml"]) as dml:
        names = dml.namelist()
    if "onnxruntime/capi/onnxruntime.dll" not in names:
        return "FAIL loader: onnxruntime-directml ships no capi/onnxruntime.dll for GenAI to load"
    with zipfile.ZipFile(wheels["onnxruntime-genai-winml"]) as genai:
        loader = genai.read("onnxruntime_genai/_dll_directory.py").decode("utf-8")
    if not re.search(r'os\.path\.join\(ort_package_path, "capi", "onnxruntime\.dll"\)', loader):
        return "FAIL loader: onnxruntime-genai-winml no longer loads onnxruntime.dll from the onnxruntime package"
    return "ok   loader: GenAI loads onnxruntime/capi/onnxruntime.dll from onnxruntime-directml"


def check_old_runtime(directml_version: str, scratch: Path) -> str:
    env = scratch / "venv"
    venv.EnvBuilder(with_pip=True).create(env)
    python = str(env / "bin" / "python")
    steps = (("install", "--only-binary=:all:", f"onnxruntime=={directml_version}", "numpy"),
             ("install", "--only-binary=:all:", "--no-deps", "onnxruntime-genai==0.18.0"))
    for step in steps:
        done = pip(*step, python=python)
        if done.returncode != 0:
            return f"FAIL runtime: could not install {step[-1]}:\n{done.stderr[-1500:]}"
    run = subprocess.run([python, "-c", GENERATE, str(TINY_ONNX)], capture_output=True, text=True)
    if run.returncode != 0 or "tokens" not in run.stdout:
        return f"FAIL runtime: GenAI 0.18 did not run on onnxruntime {directml_version}:\n{run.stderr[-1500:]}"
    fallback = [line for line in run.stderr.splitlines() if "API version" in line]
    note = f" (it asked for newer API versions first: {len(fallback)} notices)" if fallback else ""
    return f"ok   runtime: {run.stdout.strip()}{note}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        scratch = args.keep or Path(temporary)
        scratch.mkdir(parents=True, exist_ok=True)
        wheels = download_windows_set(scratch / "wheels")
        versions = {name: wheel.name.split("-")[1] for name, wheel in wheels.items() if name in
                    ("onnxruntime-directml", "onnxruntime-genai-winml", "windowsml")}
        print("ok   resolve: " + ", ".join(f"{name} {version}" for name, version in sorted(versions.items())))
        results = [check_loader(wheels), check_old_runtime(versions["onnxruntime-directml"], scratch)]
    for line in results:
        print(line)
    return 1 if any(line.startswith("FAIL") for line in results) else 0


if __name__ == "__main__":
    sys.exit(main())
