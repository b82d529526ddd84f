"""Kestrel's own log: a few rotating files in the data paths' log folder (the Logs folder About names)."""

from __future__ import annotations

import logging
import re
from logging.handlers import RotatingFileHandler
from pathlib import Path

LOG_FILE = "kestrel.log"
# Enough for weeks of errors, downloads and server events, never enough to matter on a disk.
MAX_BYTES = 2 * 1024 * 1024
BACKUPS = 3
# Kestrel's own modules log under "app" (logging.getLogger(__name__)); what they say at INFO is kept.
# Other libraries keep the root's WARNING, so a chatty one (an HTTP client's INFO lines name each URL) is not.
OWN_LOGGER = "app"
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_kept: RotatingFileHandler | None = None

# Words a person typed reach Problem texts only in quotes (a chat's title, an imported file's name).
_QUOTED = re.compile(r"“[^”]*”|\"[^\"]*\"|‘[^’]*’")
# A key as the API server makes them, or as other providers shape theirs, wherever it appears.
_KEY = re.compile(r"\b(?:sk|kst|key)[-_][A-Za-z0-9_-]{8,}|\b[A-Za-z0-9_-]{32,}\b")


def keep_log(folder: Path) -> Path:
    """Write this process's log to folder/kestrel.log from now on (rotated at MAX_BYTES, BACKUPS kept);
    the path. Called again with another folder (a test's own home), it moves there."""
    global _kept
    path = folder / LOG_FILE
    if _kept is not None and Path(_kept.baseFilename) == path.absolute():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    # Opened now (not delay=True): a folder removed later fails each write silently, not with a traceback.
    handler = RotatingFileHandler(path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8")
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.setLevel(logging.INFO)
    stop_log()
    logging.getLogger().addHandler(handler)
    logging.getLogger(OWN_LOGGER).setLevel(logging.INFO)
    _kept = handler
    return path


def stop_log() -> None:
    """Close the log file (at exit, or before moving it)."""
    global _kept
    if _kept is not None:
        logging.getLogger().removeHandler(_kept)
        _kept.close()
        _kept = None


def kept_file() -> Path | None:
    """Where the log is written now (None: nowhere yet)."""
    return Path(_kept.baseFilename) if _kept is not None else None


def without_private(text: str) -> str:
    """A user-facing sentence made fit for the log: quoted words (a chat's title, which is its first message)
    and anything shaped like a key become "…"."""
    return _KEY.sub("…", _QUOTED.sub("“…”", text))
