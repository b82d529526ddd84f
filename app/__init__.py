"""Kestrel: an offline AI assistant for the desktop."""

import os

# Read on first use (see __getattr__), so importing app costs nothing: every process,
# the engine child included, imports it first.
__version__: str

# Nothing the user types leaves the machine, and neither does anything about it: ONNX
# Runtime and ONNX Runtime GenAI carry Microsoft's 1DS telemetry uploader, which looks up
# mobile.events.data.microsoft.com a few seconds after the import and keeps a device ID
# and an event store under ~/.cache/Microsoft (in the registry on Windows). The variable
# must be set before either library is imported; every Kestrel process (the window, the
# engine child, the CLI, the frozen app) imports this package first, and children inherit
# it. Set unconditionally: no setting of the user's turns it back on.
os.environ["ORT_DISABLE_TELEMETRY"] = "1"


def __getattr__(name: str) -> str:
    if name != "__version__":
        raise AttributeError(f"module 'app' has no attribute {name!r}")
    global __version__
    __version__ = _read_version()
    return __version__


def _read_version() -> str:
    """pyproject.toml's version: from the file itself in a source checkout (an editable
    install's metadata goes stale when the file changes), else from the installed
    metadata (a wheel, or the frozen app, whose build copies kestrel's dist-info in)."""
    from pathlib import Path

    project = Path(__file__).resolve().parent.parent / "pyproject.toml"
    if project.is_file():
        import tomllib

        with open(project, "rb") as file:
            table = tomllib.load(file).get("project", {})
        if table.get("name") == "kestrel":
            return str(table["version"])
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kestrel")
    except PackageNotFoundError:
        return "unknown"
