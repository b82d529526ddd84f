"""The pieces the build uses, checked without building: one version, the Windows version
resource's text, the rendered icons, and the resources folder from source."""

from __future__ import annotations

import importlib.util
import struct
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

from tests.frozen.conftest import ROOT

ICONS = ROOT / "resources" / "icons"


def load_script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"kestrel_{name}", ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pyproject_version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])


def test_the_version_is_written_once_in_pyproject() -> None:
    import app

    assert app.__version__ == pyproject_version() == load_script("build").project_version()
    result = subprocess.run([sys.executable, "-m", "app", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert result.stdout.strip() == f"Kestrel {pyproject_version()}"
    assert "__version__ = \"" not in (ROOT / "app" / "__init__.py").read_text(encoding="utf-8")


@pytest.mark.parametrize(("version", "numbers"), [("0.1.0", (0, 1, 0, 0)), ("1.2", (1, 2, 0, 0)),
                                                  ("0.2.0rc1", (0, 2, 0, 0)), ("2.0.1.post3", (2, 0, 1, 0))])
def test_windows_version_numbers(version: str, numbers: tuple[int, ...]) -> None:
    assert load_script("build").version_numbers(version) == numbers


def test_windows_version_resource_text_names_kestrel_and_its_version() -> None:
    """PyInstaller evals this text with its versioninfo classes (Windows only); here each
    class records what it was given, which is the structure the resource will have."""
    def recorder(kind: str):
        return lambda *args, **kwargs: (kind, args, kwargs)

    names = ["VSVersionInfo", "FixedFileInfo", "StringFileInfo", "StringTable", "StringStruct", "VarFileInfo",
             "VarStruct"]
    text = load_script("build").version_file_text("1.2.3", "kestrel.exe")
    info = eval(text, {name: recorder(name) for name in names})  # noqa: S307 (our own text)
    fixed = info[2]["ffi"][2]
    assert fixed["filevers"] == fixed["prodvers"] == (1, 2, 3, 0)
    string_table = info[2]["kids"][0][1][0][0][1][1]
    strings = {entry[1][0]: entry[1][1] for entry in string_table}
    assert strings["ProductName"] == strings["FileDescription"] == "Kestrel"
    assert strings["ProductVersion"] == strings["FileVersion"] == "1.2.3"
    assert strings["OriginalFilename"] == "kestrel.exe"


def test_resources_folder_from_source_and_frozen(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from app.core.resources import resource_path, resources_folder

    assert resources_folder() == ROOT / "resources"
    assert resource_path("catalog.json").is_file()
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    assert resource_path("icons", "kestrel.ico") == tmp_path / "resources" / "icons" / "kestrel.ico"


def test_the_window_has_the_icon_at_every_size(qapp) -> None:
    from app.ui.app import app_icon

    sizes = load_script("make_icons").SIZES
    assert sorted(size.width() for size in app_icon().availableSizes()) == sorted(sizes)


def ico_entries(data: bytes) -> list[tuple[int, bytes]]:
    """(size, image bytes) of each image in an .ico."""
    reserved, kind, count = struct.unpack_from("<HHH", data)
    assert (reserved, kind) == (0, 1)
    entries = []
    for n in range(count):
        width, height, _, _, planes, bits, length, offset = struct.unpack_from("<BBBBHHII", data, 6 + 16 * n)
        assert width == height and (planes, bits) == (1, 32)
        entries.append((width or 256, data[offset:offset + length]))
    return entries


def test_committed_icons_are_valid_at_every_size() -> None:
    sizes = load_script("make_icons").SIZES
    entries = ico_entries((ICONS / "kestrel.ico").read_bytes())
    assert [size for size, _ in entries] == list(sizes)
    for size, blob in entries:
        if size == 256:
            assert blob.startswith(b"\x89PNG")
        else:  # a 32-bit bitmap: its header, the pixels, the AND mask
            assert struct.unpack_from("<Iii", blob) == (40, size, size * 2)
            assert len(blob) == 40 + size * size * 4 + ((size + 31) // 32) * 4 * size
    for size in sizes:
        assert (ICONS / f"kestrel-{size}.png").read_bytes().startswith(b"\x89PNG")


def test_rendering_the_svg_again_gives_the_committed_icons(qapp, tmp_path: Path) -> None:
    """Someone changed icon.svg without running scripts/make_icons.py, or the reverse."""
    from PySide6.QtGui import QImage

    for path in load_script("make_icons").make_icons(tmp_path):
        if path.suffix == ".png":
            fresh, committed = QImage(str(path)), QImage(str(ICONS / path.name))
            assert committed.size() == fresh.size(), path.name
            assert _mean_difference(fresh, committed) < 1.0, path.name
        else:
            assert len(ico_entries(path.read_bytes())) == len(ico_entries((ICONS / path.name).read_bytes()))


def _mean_difference(one, other) -> float:
    """Mean absolute difference per channel (0-255): Qt versions may antialias a little apart."""
    from PySide6.QtGui import QImage

    a = bytes(one.convertToFormat(QImage.Format.Format_ARGB32).constBits())
    b = bytes(other.convertToFormat(QImage.Format.Format_ARGB32).constBits())
    return sum(abs(x - y) for x, y in zip(a, b)) / len(a)
