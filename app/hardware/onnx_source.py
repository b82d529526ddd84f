"""ONNX Runtime as a source: Windows ML provider registration, then the EP devices it sees."""

from __future__ import annotations

import threading
from typing import Any, Callable

from app.hardware.report import DeviceKind, EpDevice, OnnxRuntimeInfo, WindowsMlStatus

# Windows ML ships its execution-provider catalog from Windows 11 24H2 on.
WINDOWS_ML_MIN_BUILD = 26100

_KINDS: dict[str, DeviceKind] = {"CPU": "cpu", "GPU": "gpu", "NPU": "npu"}

# ONNX Runtime ends the process (exit 127) when one provider library is registered twice,
# so registration is remembered for the life of the process.
_registered: set[str] = set()
# The library each provider came from, for ONNX Runtime GenAI's own registry.
_libraries: dict[str, str] = {}
# Releasing the catalog crashes the process with some Qualcomm NPU drivers, and the
# providers it handed out live as long as it does: the catalog is kept until exit.
_catalogs: list[Any] = []
_lock = threading.Lock()


def windows_build(platform_info: dict[str, str]) -> int | None:
    """The build number in platform.version() ("10.0.26100" -> 26100)."""
    parts = platform_info.get("version", "").split(".")
    return int(parts[2]) if len(parts) >= 3 and parts[2].isdigit() else None


def gather_onnxruntime(platform_info: dict[str, str], allow_downloads: bool) -> dict[str, Any]:
    """Raw facts from the installed onnxruntime, after the Windows ML catalog has had its turn."""
    # Imported before windowsml: on Windows an older onnxruntime.dll in System32 would
    # otherwise be loaded first and the providers would register with the wrong runtime.
    import onnxruntime as ort

    quiet_windows_telemetry(ort, platform_info.get("system", ""))
    if platform_info.get("system") == "Windows":
        windows_ml = register_windows_ml(ort, _import_catalog, windows_build(platform_info), allow_downloads)
    else:
        windows_ml = {"state": "not_windows", "message": "Windows ML exists only on Windows."}
    devices = ort.get_ep_devices() if hasattr(ort, "get_ep_devices") else None
    return {
        "version": ort.__version__,
        "providers": list(ort.get_available_providers()),
        "ep_devices": None if devices is None else [ep_device_record(d) for d in devices],
        "windows_ml": windows_ml,
    }


def quiet_windows_telemetry(library: Any, system: str) -> bool:
    """Turn off the ETW telemetry events of Windows builds of ONNX Runtime (and GenAI).

    ORT_DISABLE_TELEMETRY (set in app/__init__.py) stops the 1DS uploader that Linux and
    GenAI builds carry; the Windows onnxruntime.dll instead writes TraceLogging events that
    Windows' own diagnostics may send on, and only this call stops those. True when done.
    """
    if system != "Windows" or not hasattr(library, "disable_telemetry_events"):
        return False
    try:
        library.disable_telemetry_events()
    except Exception:  # noqa: BLE001 - an older or odd build: the environment variable still holds
        return False
    return True


def _import_catalog() -> Any:
    from windowsml import EpCatalog

    return EpCatalog


def register_windows_ml(ort: Any, import_catalog: Callable[[], Any], build: int | None,
                        allow_downloads: bool) -> dict[str, Any]:
    """Make the catalog's providers ready and register them with ONNX Runtime.

    A provider the catalog offers but that is not on the machine yet is downloaded by
    Windows only when allow_downloads is set: Kestrel does not go online by itself.
    """
    if build is None or build < WINDOWS_ML_MIN_BUILD:
        return {"state": "unsupported", "message": f"Windows ML needs Windows 11 24H2 (build "
                f"{WINDOWS_ML_MIN_BUILD}) or newer; this is build {build}. DirectML and CPU remain."}
    try:
        catalog_class = import_catalog()
    except ImportError:
        return {"state": "absent", "message": "The windowsml package is not installed, so the NPU "
                "providers of the Windows ML catalog (QNN, OpenVINO, VitisAI) are not available. "
                "DirectML and CPU remain."}
    except OSError as exc:  # windowsml loads its DLL on import; a missing or blocked DLL lands here
        return {"state": "failed", "message": f"The windowsml package is installed but its library did "
                f"not load: {exc}. Reinstall it with pip install --force-reinstall windowsml. "
                "DirectML and CPU remain.", "failed": [f"windowsml: {exc}"]}
    with _lock:
        try:
            catalog = catalog_class()
            providers = list(catalog.find_all_providers())
        except Exception as exc:  # the catalog is native code: any failure is reported, not raised
            return {"state": "failed", "message": f"The Windows ML catalog could not be read: {exc}. "
                    "DirectML and CPU remain.", "failed": [f"catalog: {exc}"]}
        _catalogs.append(catalog)
        return _register_each(ort, providers, allow_downloads)


def _register_each(ort: Any, providers: list[Any], allow_downloads: bool) -> dict[str, Any]:
    present = {device.ep_name for device in ort.get_ep_devices()}
    registered: list[str] = []
    not_installed: list[str] = []
    failed: list[str] = []
    for provider in providers:
        name = str(provider.name)
        if name in _registered or name in present:
            registered.append(name)
            continue
        if _ready_state(provider) == "notpresent" and not allow_downloads:
            not_installed.append(name)
            continue
        try:
            provider.ensure_ready()
            path = str(provider.library_path or "")
            if not path:
                raise RuntimeError("the catalog gave no library path")
            ort.register_execution_provider_library(name, path)
        except Exception as exc:  # one provider failing must not cost the others
            failed.append(f"{name}: {exc}")
            continue
        _registered.add(name)
        _libraries[name] = path
        registered.append(name)
    record = _status_record(registered, not_installed, failed)
    record["libraries"] = [[name, path] for name, path in _libraries.items() if name in registered]
    return record


def _ready_state(provider: Any) -> str:
    state = getattr(provider, "ready_state", None)
    return str(getattr(state, "name", state)).lower().replace("_", "")


def _status_record(registered: list[str], not_installed: list[str], failed: list[str]) -> dict[str, Any]:
    parts = []
    if registered:
        parts.append("registered " + ", ".join(registered))
    if not_installed:
        parts.append("offered but not installed: " + ", ".join(not_installed)
                     + " (kestrel doctor --allow-downloads lets Windows fetch them)")
    if failed:
        parts.append("failed: " + "; ".join(failed))
    state = "registered" if registered else ("failed" if failed else "nothing_ready")
    message = "Windows ML " + ("; ".join(parts) if parts else "offers no providers for this PC") + "."
    return {"state": state, "message": message, "registered": registered,
            "not_installed": not_installed, "failed": failed}


def ep_device_record(device: Any) -> dict[str, Any]:
    """An OrtEpDevice as plain data, the way fixtures store it."""
    hardware = device.device
    return {
        "ep_name": device.ep_name, "ep_vendor": device.ep_vendor,
        "ep_metadata": dict(device.ep_metadata), "ep_options": dict(device.ep_options),
        "device": {
            "type": getattr(hardware.type, "name", str(hardware.type)), "vendor": hardware.vendor,
            "vendor_id": int(hardware.vendor_id), "device_id": int(hardware.device_id),
            "metadata": dict(hardware.metadata),
        },
    }


def onnxruntime_from(facts: dict[str, Any]) -> tuple[OnnxRuntimeInfo, tuple[EpDevice, ...]]:
    """Parse the raw facts into the report's values."""
    ml = facts.get("windows_ml") or {}
    status = WindowsMlStatus(state=ml.get("state", "unknown"), message=ml.get("message", ""),
                             registered=tuple(ml.get("registered", ())),
                             not_installed=tuple(ml.get("not_installed", ())),
                             failed=tuple(ml.get("failed", ())),
                             libraries=tuple((str(n), str(p)) for n, p in ml.get("libraries", ())))
    info = OnnxRuntimeInfo(version=str(facts["version"]), providers=tuple(facts.get("providers", ())),
                           windows_ml=status)
    records = facts.get("ep_devices") or []
    return info, tuple(ep_device_from(record) for record in records)


def ep_device_from(record: dict[str, Any]) -> EpDevice:
    hardware = record["device"]
    metadata = {str(k): str(v) for k, v in (hardware.get("metadata") or {}).items()}
    kind = _KINDS.get(str(hardware["type"]).split(".")[-1].upper(), "cpu")
    vendor = str(hardware.get("vendor") or "")
    name = " ".join(metadata.get("Description", "").split()) or vendor or record["ep_name"]
    discrete = metadata.get("Discrete")
    adapter = metadata.get("DxgiAdapterNumber", "")
    return EpDevice(
        provider=str(record["ep_name"]), provider_vendor=str(record.get("ep_vendor", "")), kind=kind,
        vendor=vendor, vendor_id=int(hardware.get("vendor_id", 0)),
        device_id=int(hardware.get("device_id", 0)), name=name,
        memory=_megabytes(metadata.get("DxgiVideoMemory", "")),
        discrete=None if discrete is None else discrete == "1",
        adapter_index=int(adapter) if adapter.isdigit() else None,
    )


def _megabytes(text: str) -> int | None:
    # ONNX Runtime writes DXGI's dedicated memory as "<N> MB" (MiB, in fact).
    number = text.strip().removesuffix("MB").strip()
    return int(number) * 1024**2 if number.isdigit() else None
