"""The layering of docs/design.md, checked with the import-linter contracts in pyproject.toml."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
# The console script, run with this interpreter so that it sees this environment's app.
LINT_IMPORTS = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
# The contract against import cycles; its violation needs two modules, so it has a test of its own.
NO_CYCLES = "no-import-cycles"


def lint_imports(cwd: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    """Run import-linter on the `app` package found in `cwd`, with this project's contracts."""
    # import-linter puts the working folder first on sys.path, so the `app` it reads is
    # the one in `cwd`, not the installed one. --no-cache keeps it from writing a cache
    # folder there.
    args = [sys.executable, "-c", LINT_IMPORTS, str(PYPROJECT), "--no-cache", "--no-logo"]
    for contract in contracts:
        args += ["--contract", contract]
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)


def contracts() -> list[dict[str, Any]]:
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    contracts: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def test_the_layering_contracts_are_kept() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Contracts: {len(contracts())} kept, 0 broken." in result.stdout, result.stdout


def test_every_package_of_app_has_a_place_in_the_layering() -> None:
    # import-linter refuses a contract that names a missing module, so a new layer such
    # as app.server has to be added to the contracts by hand once it exists.
    named: set[str] = set()
    for contract in contracts():
        for key in ("source_modules", "forbidden_modules", "allowed_importers"):
            named.update(str(module) for module in contract.get(key, ()))
    packages = sorted(f"app.{p.parent.name}" for p in (ROOT / "app").glob("*/__init__.py"))
    missing = [package for package in packages if package not in named]
    assert not missing, f"add {', '.join(missing)} to the [tool.importlinter] contracts in pyproject.toml"


# For each contract, a module to add to a copy of app and what it imports. Every import is
# made inside a function, the way a lazy import would be, and the Qt one only indirectly.
VIOLATIONS = {
    "qt-only-in-ui": ("app/cli/_violation.py", "import qasync", "app.cli._violation -> qasync"),
    "no-qt-below-ui": ("app/library/_violation.py", "import app._qt_helper",
                       "app.library._violation -> app._qt_helper"),
    "engine-below-service": ("app/engine/_violation.py", "import app.service",
                             "app.engine._violation -> app.service"),
    "foundations-import-nothing-above": ("app/core/_violation.py", "import app.engine",
                                         "app.core._violation -> app.engine"),
    "root-and-doors-only-for-front-ends": ("app/service/chats/_violation.py", "import app.service.doors.chat",
                                           "app.service.chats._violation -> app.service.doors.chat"),
    "server-is-a-front-end": ("app/server/_violation.py", "import app.service.root",
                              "app.server._violation -> app.service.root"),
    "nothing-below-imports-the-server": ("app/service/_violation.py", "import app.server.runner",
                                         "app.service._violation -> app.server.runner"),
    "tools-below-service": ("app/tools/_violation.py", "import app.service", "app.tools._violation -> app.service"),
    "voice-below-the-front-ends": ("app/voice/_violation.py", "import app.server.errors",
                                   "app.voice._violation -> app.server.errors"),
    "documents-below-service": ("app/documents/_violation.py", "import app.engine.process",
                                "app.documents._violation -> app.engine.process"),
    "service-floor": ("app/service/history_watch.py", "import app.service.chats.answering",
                      "app.service.history_watch -> app.service.chats.answering"),
    "service-models-under-the-wings": ("app/service/models/_violation.py", "import app.service.tools.tool_use",
                                       "app.service.models._violation -> app.service.tools.tool_use"),
    "service-library-documents-tools-apart": ("app/service/tools/_violation.py", "import app.service.chats.answering",
                                              "app.service.tools._violation -> app.service.chats.answering"),
    "service-library-documents-tools-independent": ("app/service/library/_violation.py",
                                                    "import app.service.documents.documents_service",
                                                    "app.service.library._violation -> app.service.documents.documents_service"),
    "service-voice-wing": ("app/service/voice/_violation.py", "import app.service.chats.answering",
                           "app.service.voice._violation -> app.service.chats.answering"),
    "service-chats-under-api": ("app/service/chats/_violation.py", "import app.service.api.api_answers",
                                "app.service.chats._violation -> app.service.api.api_answers"),
    "children-supervisor-stands-alone": ("app/core/children/_violation.py", "import app.tools.processes",
                                         "app.core.children._violation -> app.tools.processes"),
    "ui-state-and-common-under-the-wings": ("app/ui/state/_violation.py", "import app.ui.chat.composer",
                                            "app.ui.state._violation -> app.ui.chat.composer"),
    "ui-wings-under-the-window": ("app/ui/models/_violation.py", "import app.ui.main_window",
                                  "app.ui.models._violation -> app.ui.main_window"),
    "quick-ask-shortcuts-alone": ("app/ui/quick_ask/shortcuts/_violation.py", "import app.core.settings",
                                  "app.ui.quick_ask.shortcuts._violation -> app.core.settings"),
    "ui-messages-paint-alone": ("app/ui/messages/_violation.py", "import app.ui.chat.sidebar",
                                "app.ui.messages._violation -> app.ui.chat.sidebar"),
    "ui-models-apart": ("app/ui/models/_violation.py", "import app.ui.documents.documents_window",
                        "app.ui.models._violation -> app.ui.documents.documents_window"),
    "engine-floor": ("app/engine/errors.py", "import app.engine.answers.answer_common",
                     "app.engine.errors -> app.engine.answers.answer_common"),
    "engine-prompt-and-calls-under-answers": ("app/engine/tool_calls/_violation.py",
                                              "import app.engine.answers.answer_shape",
                                              "app.engine.tool_calls._violation -> app.engine.answers.answer_shape"),
    "engine-templates-and-tool-calls-independent": ("app/engine/templates/_violation.py",
                                                    "import app.engine.tool_calls.tool_calls",
                                                    "app.engine.templates._violation -> app.engine.tool_calls.tool_calls"),
    "engine-answers-under-the-backends": ("app/engine/answers/_violation.py", "import app.engine.backends.llama.lazy_grammar",
                                          "app.engine.answers._violation -> app.engine.backends.llama.lazy_grammar"),
    "engine-backends-under-the-loop": ("app/engine/backends/_violation.py", "import app.engine.process",
                                       "app.engine.backends._violation -> app.engine.process"),
    "engine-backends-independent": ("app/engine/backends/onnx/_violation.py", "import app.engine.backends.llama.grammar",
                                    "app.engine.backends.onnx._violation -> app.engine.backends.llama.grammar"),
    "llama-cpp-only-in-its-backend": ("app/engine/answers/_violation.py", "import llama_cpp",
                                      "app.engine.answers._violation -> llama_cpp"),
    "onnx-genai-only-in-its-backend": ("app/engine/backends/llama/_violation.py", "import onnxruntime_genai",
                                       "app.engine.backends.llama._violation -> onnxruntime_genai"),
}


def test_every_contract_has_a_violation_that_proves_it_can_fail() -> None:
    assert sorted([*VIOLATIONS, NO_CYCLES]) == sorted(str(contract["id"]) for contract in contracts())


@pytest.mark.parametrize("contract", sorted(VIOLATIONS))
def test_a_contract_breaks_on_a_violating_import(contract: str, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "app", tmp_path / "app", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "app" / "_qt_helper.py").write_text('"""Not app.ui, yet imports Qt."""\n\nimport PySide6\n',
                                                     encoding="utf-8")
    module, statement, chain = VIOLATIONS[contract]
    target = tmp_path / module
    late = f"\n\ndef _late_violation() -> None:\n    {statement}\n"
    if target.exists():  # a contract over named modules (the service's floor) is broken from inside one of them
        target.write_text(target.read_text(encoding="utf-8") + late, encoding="utf-8")
    else:
        target.write_text(f'"""A layering violation."""\n{late}', encoding="utf-8")
    result = lint_imports(tmp_path, contract)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "BROKEN" in output and chain in output, output


def test_no_import_cycle_inside_any_package() -> None:
    result = lint_imports(ROOT, NO_CYCLES)
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_import_cycle_hidden_behind_type_checking_is_reported(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "app", tmp_path / "app", ignore=shutil.ignore_patterns("__pycache__"))
    for module, other in (("_cycle_one", "_cycle_two"), ("_cycle_two", "_cycle_one")):
        (tmp_path / "app" / "library" / f"{module}.py").write_text(
            f'"""Half of an import cycle."""\n\nfrom typing import TYPE_CHECKING\n\n'
            f"if TYPE_CHECKING:\n    from app.library import {other}\n", encoding="utf-8")
    result = lint_imports(tmp_path, NO_CYCLES)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "No cycles are allowed in app.library." in output, output
    assert "._cycle_one -> ._cycle_two" in output or "._cycle_two -> ._cycle_one" in output, output
