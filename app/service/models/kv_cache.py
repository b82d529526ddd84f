"""Where the saved chat states live, how much they take, and clearing them (the settings' button)."""

from __future__ import annotations

from pathlib import Path

from app.core.paths import data_paths
from app.engine.backends.llama.state_store import RAM_BUDGET, clear_folder, folder_usage

FOLDER_NAME = "chat-states"
MIB = 1024 * 1024


def states_folder() -> Path:
    """The saved states' folder, inside the cache folder: losing it loses only speed."""
    return data_paths().cache / FOLDER_NAME


def load_options(disk_mb: int) -> tuple[int, str | None, int]:
    """EngineClient.load's state_ram_bytes, state_dir and state_disk_bytes for a disk budget in MiB."""
    return RAM_BUDGET, (str(states_folder()) if disk_mb > 0 else None), disk_mb * MIB


def usage() -> tuple[int, int]:
    """(files, bytes) the saved states take on disk now."""
    return folder_usage(states_folder())


def clear() -> None:
    """Remove every saved state file; the engine is asked to drop its RAM copies first."""
    clear_folder(states_folder())
