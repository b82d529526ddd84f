"""About Kestrel: version, where data is kept, opening it, and licences that match the packages shipped."""

from __future__ import annotations

import importlib.metadata as metadata
import json
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QUrl
from PySide6.QtWidgets import QLabel, QToolButton

from app.core.paths import data_paths
from app.core.resources import resource_path
from app.library.starter import STARTER_LICENSE, STARTER_NAME, STARTER_PUBLISHER
from app.ui.about import PROMISE, AboutDialog, bundled_parts

ROOT = Path(__file__).resolve().parents[2]
LICENSES = json.loads(resource_path("licenses.json").read_text(encoding="utf-8"))
# Licence words in package metadata that are not SPDX ids, as SPDX ids. "BSD License" is
# left out on purpose: it does not say which BSD, so an entry with it needs evidence.
SPDX = {"MIT License": "MIT", "OSI Approved :: MIT License": "MIT", "Apache 2.0": "Apache-2.0",
        "3-Clause BSD License": "BSD-3-Clause", "BSD 3-Clause License": "BSD-3-Clause"}
# What the app imports that ships with no component: itself, and setuptools' _distutils_hack,
# which a .pth file loads into every environment (the frozen app has none).
NOT_SHIPPED = {"kestrel", "setuptools"}


def declared(dist: metadata.Distribution) -> str:
    """A distribution's licence as its metadata says it: the expression, the field, or the classifiers."""
    meta = dist.metadata
    if meta.get("License-Expression"):
        return str(meta["License-Expression"])
    field = (meta.get("License") or "").strip()
    if field and "\n" not in field and len(field) < 100:  # not a whole licence text pasted in
        return field
    return "; ".join(c.removeprefix("License :: ") for c in meta.get_all("Classifier") or []
                     if c.startswith("License ::"))


def installed(name: str) -> metadata.Distribution | None:
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None


def dialog(qtbot, opened: list[QUrl], result: bool = True) -> AboutDialog:
    def open_url(url: QUrl) -> bool:
        opened.append(url)
        return result

    about = AboutDialog(data_paths(), open_url=open_url)
    qtbot.addWidget(about)
    about.show()
    return about


def test_about_says_the_version_the_promise_and_where_each_thing_is_kept(qtbot) -> None:
    about = dialog(qtbot, [])
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert about.version.text() == f"Version {version}"
    words = [label.text() for label in about.findChildren(QLabel)]
    assert PROMISE in words and "never sent anywhere" in PROMISE
    paths = data_paths()
    for name, path in (("Chats", paths.history_db), ("Models", paths.models), ("Settings", paths.settings_file),
                       ("Quick reopen of chats", paths.cache), ("Logs", paths.logs)):
        assert about.findChild(QLabel, f"path:{name}").text() == str(path)


def test_about_names_the_starter_its_publisher_and_licence_without_cutting_them(qtbot) -> None:
    about = dialog(qtbot, [])
    words = about.starter.text()
    assert STARTER_NAME in words and STARTER_PUBLISHER in words and f"{STARTER_LICENSE} licence" in words
    assert "Qwen2.5-Coder 1.5B Instruct" in words and "Apache-2.0" in words
    for width in (about.width(), about.minimumSizeHint().width()):
        about.resize(width, about.height())
        qtbot.wait(10)
        label = about.starter
        assert label.wordWrap() and label.height() >= label.heightForWidth(label.width()), width
        assert label.width() >= label.minimumSizeHint().width(), width
    table = about.licenses
    row = next(table.topLevelItem(i) for i in range(table.topLevelItemCount())
               if table.topLevelItem(i).text(0).startswith(STARTER_NAME))
    assert table.header().sectionSize(0) >= table.fontMetrics().horizontalAdvance(row.text(0))
    assert table.header().sectionSize(1) >= table.fontMetrics().horizontalAdvance(row.text(1))


def test_open_data_folder_opens_the_data_folder_and_each_row_its_own(qtbot) -> None:
    opened: list[QUrl] = []
    about = dialog(qtbot, opened)
    qtbot.mouseClick(about.open_data, Qt.MouseButton.LeftButton)
    assert opened == [QUrl.fromLocalFile(str(data_paths().data))]
    qtbot.mouseClick(about.findChild(QToolButton, "open:Settings"), Qt.MouseButton.LeftButton)
    assert opened[-1] == QUrl.fromLocalFile(str(data_paths().config))
    assert not about.note.isVisible()


def test_a_folder_that_cannot_be_opened_is_said_with_its_path(qtbot) -> None:
    about = dialog(qtbot, [], result=False)
    qtbot.mouseClick(about.open_data, Qt.MouseButton.LeftButton)
    assert about.note.isVisible()
    assert about.note.text().startswith(f"Could not open {data_paths().data}. Open it in your file manager")


def test_the_licence_table_lists_every_bundled_part(qtbot) -> None:
    about = dialog(qtbot, [])
    table = about.licenses
    shown = {table.topLevelItem(i).text(0): table.topLevelItem(i).text(1).replace("\n", " ")
             for i in range(table.topLevelItemCount())}
    assert shown == {part["name"]: part["license"] for part in LICENSES["components"]}
    for name in ("Qt 6 and PySide6 (Qt for Python)", "llama.cpp", "ONNX Runtime", "ONNX Runtime GenAI",
                 "QtAwesome", "Phosphor icons 1.3.0", "qasync", "markdown-it-py", "Pygments", "Jinja2", "psutil",
                 "platformdirs", "NumPy", "Qwen2.5-Coder 1.5B Instruct (the starter model)"):
        assert name in shown, name
    assert shown["Qwen2.5-Coder 1.5B Instruct (the starter model)"] == "Apache-2.0"
    assert bundled_parts()[0] == "Apache-2.0"


def test_each_recorded_licence_is_what_the_installed_package_declares() -> None:
    entries = [LICENSES["kestrel"], *LICENSES["components"]]
    checked = 0
    for entry in entries:
        for name, recorded in entry["packages"].items():
            dist = installed(name)
            if dist is None:
                continue  # another platform's package (onnxruntime-directml...): checked there
            assert declared(dist) == recorded, f"{name} now declares {declared(dist)!r}: update licenses.json"
            checked += 1
            spdx = SPDX.get(recorded, recorded)
            if recorded and " :: " not in spdx:
                assert spdx == entry["license"], f"{entry['name']}: {name} says {recorded!r}"
            else:  # the metadata does not say which licence: a file the package ships must, or,
                # where the package ships none (the starter's chunks), the record of what was checked
                assert any(e.get("package") in entry["packages"] or e.get("resource")
                           for e in entry.get("evidence", ())), entry["name"]
    assert checked >= 20


@pytest.mark.parametrize("entry", [e for e in LICENSES["components"] if e.get("evidence")], ids=lambda e: e["name"])
def test_each_licence_the_metadata_does_not_name_is_in_a_shipped_file(entry) -> None:
    for evidence in entry["evidence"]:
        if "python" in evidence:
            path = Path(sysconfig.get_paths()["stdlib"]) / evidence["python"]
        elif "resource" in evidence:
            path = resource_path(*evidence["resource"].split("/"))
        else:
            dist = installed(evidence["package"])
            if dist is None:
                pytest.skip(f"{evidence['package']} is not installed here")
            files = [f for f in dist.files or () if f.name == evidence["file"]]
            assert files, f"{evidence['package']} ships no {evidence['file']}"
            path = Path(str(dist.locate_file(files[0])))
        assert evidence["says"] in path.read_text(encoding="utf-8", errors="replace"), (entry["name"], path)


def test_every_package_the_app_imports_is_listed() -> None:
    # The frozen app carries what the window and the engine import; import them as they do,
    # in a fresh interpreter, and name the distribution each imported module comes from.
    script = (
        "import importlib, pkgutil, sys, importlib.metadata as m\n"
        "import app.ui.app, app.engine\n"
        "for mod in pkgutil.walk_packages(app.engine.__path__, 'app.engine.'): importlib.import_module(mod.name)\n"
        "import llama_cpp, onnxruntime\n"
        "try:\n    import onnxruntime_genai\nexcept ImportError:\n    pass\n"
        "dists = m.packages_distributions()\n"
        "tops = {n.split('.')[0] for n in sys.modules}\n"
        "print('\\n'.join(sorted({d for top in tops for d in dists.get(top, [])})))\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    imported = {metadata.distribution(name).metadata["Name"] for name in result.stdout.split()}
    listed = {installed(name).metadata["Name"] for entry in LICENSES["components"]  # type: ignore[union-attr]
              for name in entry["packages"] if installed(name) is not None}
    missing = sorted(imported - listed - NOT_SHIPPED)
    assert not missing, f"add {', '.join(missing)} to resources/licenses.json with the licence it declares"
    assert {"PySide6_Essentials", "llama_cpp_python", "onnxruntime", "QtAwesome", "psutil"} <= imported
