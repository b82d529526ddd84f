"""Where Kestrel keeps its files: per-user data, config, cache and logs."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

APP_NAME = "Kestrel"
APP_AUTHOR = "Kestrel"
# Tests and portable installs point every location under one folder with this.
HOME_ENV = "KESTREL_HOME"


@dataclass(frozen=True)
class DataPaths:
    """The folders Kestrel reads and writes; created on first use."""

    data: Path
    config: Path
    cache: Path
    logs: Path

    @property
    def models(self) -> Path:
        return self.data / "models"

    @property
    def history_db(self) -> Path:
        return self.data / "history.sqlite3"

    @property
    def settings_file(self) -> Path:
        return self.config / "settings.json"

    @property
    def mcp_file(self) -> Path:
        # The name and format Claude Desktop, Cursor and LM Studio use, so a file from them works here.
        return self.config / "mcp.json"

    def ensure(self) -> "DataPaths":
        for folder in (self.data, self.config, self.cache, self.logs, self.models):
            folder.mkdir(parents=True, exist_ok=True)
        return self


def data_paths() -> DataPaths:
    """The locations for this user, or those under $KESTREL_HOME when it is set."""
    home = os.environ.get(HOME_ENV)
    if home:
        root = Path(home)
        return DataPaths(root / "data", root / "config", root / "cache", root / "logs")
    dirs = platformdirs.PlatformDirs(APP_NAME, APP_AUTHOR)
    return DataPaths(
        Path(dirs.user_data_dir),
        Path(dirs.user_config_dir),
        Path(dirs.user_cache_dir),
        Path(dirs.user_log_dir),
    )
