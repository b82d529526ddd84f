"""Windows ML catalog registration, against stand-ins that follow the windowsml package's API.

This machine has no Windows ML. The stand-ins copy the Python surface of windowsml 2.5.96
(read from its wheel: windowsml/__init__.py and _bindings.py): EpCatalog() with
find_all_providers(), providers with name, ready_state (an IntEnum: Ready 0, NotReady 1,
NotPresent 2), ensure_ready() (a ctypes HRESULT call, so failures raise OSError) and
library_path; the package loads its DLL with ctypes.WinDLL on import, so a missing DLL
raises OSError (FileNotFoundError) there. onnxruntime's side is
register_execution_provider_library and get_ep_devices.
"""

from __future__ import annotations

import enum
from types import SimpleNamespace

import pytest

from app.hardware import onnx_source
from app.hardware.onnx_source import register_windows_ml


class EpReadyState(enum.IntEnum):
    Ready = 0
    NotReady = 1
    NotPresent = 2


class FakeProvider:
    def __init__(self, name: str, state: EpReadyState, fails: str = "") -> None:
        self.name, self.ready_state, self.fails = name, state, fails
        self.library_path = "" if state is EpReadyState.NotPresent else f"C:\\Program Files\\WindowsApps\\{name}.dll"
        self.ensured = False

    def ensure_ready(self) -> None:
        if self.fails:
            raise OSError(self.fails)
        self.ensured = True
        self.library_path = f"C:\\Program Files\\WindowsApps\\{self.name}.dll"


class FakeOrt:
    def __init__(self, present: tuple[str, ...] = ("CPUExecutionProvider", "DmlExecutionProvider")) -> None:
        self.present = list(present)
        self.registered: list[tuple[str, str]] = []

    def get_ep_devices(self):
        return [SimpleNamespace(ep_name=name) for name in self.present]

    def register_execution_provider_library(self, name: str, path: str) -> None:
        self.registered.append((name, path))
        self.present.append(name)


def catalog_of(*providers: FakeProvider):
    class EpCatalog:
        def find_all_providers(self):
            return list(providers)

    return lambda: EpCatalog


@pytest.fixture(autouse=True)
def fresh_process_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(onnx_source, "_registered", set())
    monkeypatch.setattr(onnx_source, "_libraries", {})
    monkeypatch.setattr(onnx_source, "_catalogs", [])


def test_ready_providers_are_registered_and_missing_ones_are_not_downloaded() -> None:
    openvino = FakeProvider("OpenVINOExecutionProvider", EpReadyState.NotReady)
    qnn = FakeProvider("QNNExecutionProvider", EpReadyState.NotPresent)
    ort = FakeOrt()
    status = register_windows_ml(ort, catalog_of(openvino, qnn), 26100, allow_downloads=False)
    assert status["state"] == "registered"
    assert ort.registered == [("OpenVINOExecutionProvider", openvino.library_path)]
    assert openvino.ensured  # NotReady: made ready locally, no download involved
    assert status["not_installed"] == ["QNNExecutionProvider"] and not qnn.ensured
    assert "--allow-downloads" in status["message"]
    assert len(onnx_source._catalogs) == 1  # kept alive: releasing it crashes some NPU drivers
    # GenAI keeps its own registry: the report carries the library for it.
    assert status["libraries"] == [["OpenVINOExecutionProvider", openvino.library_path]]
    info, _ = onnx_source.onnxruntime_from({"version": "1.2", "windows_ml": status})
    assert info.windows_ml.libraries == (("OpenVINOExecutionProvider", openvino.library_path),)


def test_downloads_when_allowed() -> None:
    qnn = FakeProvider("QNNExecutionProvider", EpReadyState.NotPresent)
    ort = FakeOrt()
    status = register_windows_ml(ort, catalog_of(qnn), 26100, allow_downloads=True)
    assert qnn.ensured and status["registered"] == ["QNNExecutionProvider"]


def test_one_failing_provider_does_not_cost_the_others() -> None:
    broken = FakeProvider("VitisAIExecutionProvider", EpReadyState.Ready, fails="the NPU driver is too old")
    openvino = FakeProvider("OpenVINOExecutionProvider", EpReadyState.Ready)
    ort = FakeOrt()
    status = register_windows_ml(ort, catalog_of(broken, openvino), 26100, allow_downloads=False)
    assert status["registered"] == ["OpenVINOExecutionProvider"]
    assert status["failed"] == ["VitisAIExecutionProvider: the NPU driver is too old"]


def test_a_provider_is_never_registered_twice() -> None:
    # ONNX Runtime exits the process (status 127) on a second registration of one library.
    openvino = FakeProvider("OpenVINOExecutionProvider", EpReadyState.Ready)
    ort = FakeOrt(present=("CPUExecutionProvider", "OpenVINOExecutionProvider"))
    first = register_windows_ml(ort, catalog_of(openvino), 26100, allow_downloads=False)
    second = register_windows_ml(ort, catalog_of(openvino), 26100, allow_downloads=False)
    assert ort.registered == []
    assert first["registered"] == second["registered"] == ["OpenVINOExecutionProvider"]


def test_missing_package_says_directml_and_cpu_remain() -> None:
    def no_package():
        raise ModuleNotFoundError("No module named 'windowsml'")

    status = register_windows_ml(FakeOrt(), no_package, 26100, allow_downloads=False)
    assert status["state"] == "absent"
    assert "windowsml package is not installed" in status["message"] and "DirectML and CPU remain" in status["message"]


def test_a_package_whose_library_does_not_load_is_reported() -> None:
    def dll_missing():
        raise FileNotFoundError("Microsoft.Windows.AI.MachineLearning.dll not found in C:\\Users\\Zoë\\lib. ")

    status = register_windows_ml(FakeOrt(), dll_missing, 26100, allow_downloads=False)
    assert status["state"] == "failed"
    assert "did not load" in status["message"] and "pip install --force-reinstall windowsml" in status["message"]
    assert status["failed"][0].startswith("windowsml: ")


def test_older_windows_is_not_asked() -> None:
    status = register_windows_ml(FakeOrt(), catalog_of(), 22631, allow_downloads=False)
    assert status["state"] == "unsupported" and "22631" in status["message"]


def test_a_broken_catalog_is_reported() -> None:
    def broken_catalog():
        class EpCatalog:
            def __init__(self) -> None:
                raise OSError("WinMLEpCatalogCreate failed: 0x80070005")
        return EpCatalog

    status = register_windows_ml(FakeOrt(), broken_catalog, 26100, allow_downloads=False)
    assert status["state"] == "failed" and "0x80070005" in status["failed"][0]


def test_a_catalog_without_providers() -> None:
    status = register_windows_ml(FakeOrt(), catalog_of(), 26100, allow_downloads=False)
    assert status["state"] == "nothing_ready" and "offers no providers" in status["message"]
