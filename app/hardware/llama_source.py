"""llama.cpp as a source: can this build offload to a GPU, with which backend, onto which device."""

from __future__ import annotations

import ctypes
import re
import sys
from pathlib import Path
from typing import Any

from app.hardware.report import LlamaDevice, LlamaInfo

# enum ggml_backend_dev_type, in ggml-backend.h order.
_DEVICE_KINDS = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel"}

# Backend libraries a llama.cpp build ships beside libllama, by the part after "ggml-".
_LIBRARY_BACKENDS = {
    "cuda": "CUDA", "vulkan": "Vulkan", "metal": "Metal", "hip": "ROCm", "sycl": "SYCL",
    "opencl": "OpenCL", "musa": "MUSA", "cann": "CANN", "webgpu": "WebGPU", "blas": "BLAS",
    "rpc": "RPC", "zdnn": "zDNN", "cpu": "CPU",
}
# Entries of llama_print_system_info()'s CPU section that are build switches, not
# instruction sets.
_NOT_INSTRUCTION_SETS = {"LLAMAFILE", "OPENMP", "REPACK", "ACCELERATE", "KLEIDIAI", "COMPILER"}


def gather_llama() -> dict[str, Any]:
    """Raw facts from the installed llama_cpp package."""
    import llama_cpp

    lib_dir = Path(llama_cpp.__file__).parent / "lib"
    # Versioned duplicates (libggml.so.0.25.3) say nothing more than libggml.so does.
    libraries = sorted(p.name for p in lib_dir.iterdir() if p.suffix in (".so", ".dylib", ".dll")) \
        if lib_dir.is_dir() else []
    facts: dict[str, Any] = {
        "version": llama_cpp.__version__,
        "supports_gpu_offload": bool(llama_cpp.llama_supports_gpu_offload()),
        "system_info": llama_cpp.llama_print_system_info().decode("utf-8", errors="replace"),
        "libraries": libraries,
    }
    try:
        facts["registry"] = _ggml_registry(lib_dir)
    except (OSError, AttributeError) as exc:
        # llama-cpp-python does not export the registry; an older or differently built
        # ggml may lack a symbol. The library names still tell the backends.
        facts["registry_error"] = f"the ggml backend registry could not be read: {exc}"
    return facts


def _library_files(lib_dir: Path, base: str) -> list[Path]:
    if sys.platform == "win32":
        names = [f"{base}.dll", f"lib{base}.dll"]
    elif sys.platform == "darwin":
        names = [f"lib{base}.dylib", f"lib{base}.so"]
    else:
        names = [f"lib{base}.so"]
    return [lib_dir / name for name in names if (lib_dir / name).exists()]


def _ggml_registry(lib_dir: Path) -> dict[str, Any]:
    # On Windows a DLL exports only its own functions, so ggml and ggml-base are both
    # opened; elsewhere either handle finds everything.
    libs = [ctypes.CDLL(str(path)) for base in ("ggml", "ggml-base") for path in _library_files(lib_dir, base)]
    if not libs:
        raise OSError(f"no ggml library in {lib_dir}")

    def fn(name: str, restype: Any, *argtypes: Any) -> Any:
        for lib in libs:
            if hasattr(lib, name):
                function = getattr(lib, name)
                function.restype, function.argtypes = restype, list(argtypes)
                return function
        raise AttributeError(f"{name} is not exported")

    ptr, size = ctypes.c_void_p, ctypes.c_size_t
    reg_count, reg_get = fn("ggml_backend_reg_count", size), fn("ggml_backend_reg_get", ptr, size)
    reg_name = fn("ggml_backend_reg_name", ctypes.c_char_p, ptr)
    dev_count, dev_get = fn("ggml_backend_dev_count", size), fn("ggml_backend_dev_get", ptr, size)
    dev_name = fn("ggml_backend_dev_name", ctypes.c_char_p, ptr)
    dev_description = fn("ggml_backend_dev_description", ctypes.c_char_p, ptr)
    dev_type = fn("ggml_backend_dev_type", ctypes.c_int, ptr)
    dev_memory = fn("ggml_backend_dev_memory", None, ptr, ctypes.POINTER(size), ctypes.POINTER(size))
    dev_reg = fn("ggml_backend_dev_backend_reg", ptr, ptr)

    devices = []
    for index in range(dev_count()):
        device = dev_get(index)
        free, total = size(0), size(0)
        dev_memory(device, ctypes.byref(free), ctypes.byref(total))
        devices.append({
            "name": _text(dev_name(device)), "description": _text(dev_description(device)),
            "type": int(dev_type(device)), "backend": _text(reg_name(dev_reg(device))),
            "memory_free": free.value, "memory_total": total.value,
        })
    return {"backends": [_text(reg_name(reg_get(i))) for i in range(reg_count())], "devices": devices}


def _text(value: bytes | None) -> str:
    return value.decode("utf-8", errors="replace") if value else ""


def llama_from(facts: dict[str, Any]) -> tuple[LlamaInfo, list[str]]:
    """Parse the raw facts; also returns the problems met on the way, in words."""
    registry = facts.get("registry") or {}
    devices = tuple(
        LlamaDevice(name=d["name"], description=d.get("description", ""),
                    kind=_DEVICE_KINDS.get(int(d.get("type", 0)), "accel"), backend=d.get("backend", ""),
                    memory_free=int(d.get("memory_free", 0)), memory_total=int(d.get("memory_total", 0)))
        for d in registry.get("devices", ())
    )
    libraries = tuple(facts.get("libraries", ()))
    info = LlamaInfo(
        version=str(facts.get("version", "")), gpu_offload=bool(facts["supports_gpu_offload"]),
        backends=_backends(registry.get("backends", ()), libraries), devices=devices,
        cpu_features=cpu_features_from_system_info(str(facts.get("system_info", ""))), libraries=libraries,
    )
    problems = [facts["registry_error"]] if facts.get("registry_error") else []
    return info, problems


def _backends(registered: Any, libraries: tuple[str, ...]) -> tuple[str, ...]:
    names = [str(name) for name in registered]
    for library in libraries:
        match = re.match(r"^(?:lib)?ggml-([a-z0-9]+)[.]", library.lower())
        backend = _LIBRARY_BACKENDS.get(match.group(1)) if match else None
        if backend and backend.lower() not in {n.lower() for n in names}:
            names.append(backend)
    return tuple(names)


def cpu_features_from_system_info(text: str) -> tuple[str, ...]:
    """The instruction sets in llama_print_system_info()'s CPU section ("AVX2 = 1 | ...")."""
    features: list[str] = []
    section = ""
    for item in text.split("|"):
        if ":" in item:
            section, _, item = item.partition(":")
            section = section.strip().upper()
        name, _, value = item.partition("=")
        name = name.strip().upper()
        if section == "CPU" and value.strip() == "1" and name and name not in _NOT_INSTRUCTION_SETS:
            features.append(name)
    return tuple(features)
