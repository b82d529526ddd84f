"""Servers' keys: in the system's credential store through `keyring`, else in a file only this user can read, said in words.

keyring reaches Windows' Credential Manager, macOS's Keychain and the Secret Service (GNOME Keyring,
KWallet) on Linux. Where none answers (a Linux without a desktop's keyring, or keyring not installed),
the key goes to server-keys.json beside settings.json, mode 0600, and the words say so and why.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import ModuleType
from typing import Any

from app.core.files import write_atomically
from app.core.paths import DataPaths

KEYRING_SERVICE = "Kestrel servers"  # what the credential store shows the entries under
KEYS_FILE = "server-keys.json"
KEYS_VERSION = 1


def keys_file(paths: DataPaths) -> Path:
    return paths.config / KEYS_FILE


class KeyPlace(StrEnum):
    KEYRING = "keyring"
    FILE = "file"


@dataclass(frozen=True)
class KeptKey:
    """Where a key was put, and that in words for the person."""

    place: KeyPlace
    words: str


class ServerKeys:
    """Keeps one key per server name. keyring_module: the keyring to use (None: `import keyring`, if installed)."""

    def __init__(self, fallback: Path, keyring_module: ModuleType | None = None) -> None:
        self.fallback = fallback
        self._given = keyring_module

    def get(self, server: str) -> str | None:
        """The server's key, from the credential store or the file; None when it has none."""
        store, _ = self._store()
        if store is not None:
            try:
                found = store.get_password(KEYRING_SERVICE, server)
            except Exception:  # noqa: BLE001 - any backend's failure (D-Bus, a locked keychain): try the file
                found = None
            if found:
                return str(found)
        return self._read_file().get(server)

    def set(self, server: str, key: str) -> KeptKey:
        """Keep the key (an empty one forgets it). OSError if neither the store nor the disk takes it."""
        if not key:
            self.delete(server)
            return KeptKey(KeyPlace.FILE, "No key is kept for it.")
        store, why_not = self._store()
        if store is not None:
            try:
                store.set_password(KEYRING_SERVICE, server, key)
            except Exception as exc:  # noqa: BLE001 - a store that is there but refuses: the file, with its words
                why_not = f"the credential store refused it ({type(exc).__name__}: {exc})"
            else:
                self._drop_from_file(server)
                return KeptKey(KeyPlace.KEYRING, f"The key is kept in {_store_name(store)}.")
        files = self._read_file()
        files[server] = key
        self._write_file(files)
        private = "a file in your own profile" if sys.platform == "win32" else "a file only you can read"
        return KeptKey(KeyPlace.FILE, f"The key is kept in {self.fallback}, {private}, because {why_not}.")

    def delete(self, server: str) -> None:
        """Forget the server's key wherever it is."""
        store, _ = self._store()
        if store is not None:
            try:
                store.delete_password(KEYRING_SERVICE, server)
            except Exception:  # noqa: BLE001 - none kept there (PasswordDeleteError), or a store that fails
                pass
        self._drop_from_file(server)

    def _store(self) -> tuple[Any | None, str]:
        """The keyring module when a real credential store answers, else None and why not, in words."""
        module: Any = self._given
        if module is None:
            try:
                import keyring

                module = keyring
            except ImportError:
                return None, "the keyring package is not installed"
        try:
            backend = module.get_keyring()
            priority = float(getattr(backend, "priority", 0))
        except Exception as exc:  # noqa: BLE001 - a broken keyring configuration
            return None, f"the system's credential store could not be opened ({exc})"
        if priority <= 0 or type(backend).__module__.startswith(("keyring.backends.fail", "keyring.backends.null")):
            return None, ("no system credential store answered (on Linux: no Secret Service, such as GNOME Keyring "
                          "or KWallet, is running)")
        return module, ""

    def _read_file(self) -> dict[str, str]:
        try:
            data = json.loads(self.fallback.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return {}
        keys = data.get("keys") if isinstance(data, dict) else None
        return {str(k): v for k, v in keys.items() if isinstance(v, str)} if isinstance(keys, dict) else {}

    def _write_file(self, keys: dict[str, str]) -> None:
        text = json.dumps({"version": KEYS_VERSION, "keys": keys}, indent=2, ensure_ascii=False) + "\n"
        # The temporary file write_atomically makes is 0600 already (mkstemp); said again for a file
        # someone loosened by hand, which the rename replaces.
        write_atomically(self.fallback, text.encode("utf-8"))
        if sys.platform != "win32":
            os.chmod(self.fallback, 0o600)

    def _drop_from_file(self, server: str) -> None:
        keys = self._read_file()
        if server in keys:
            del keys[server]
            self._write_file(keys)


def _store_name(module: Any) -> str:
    name = type(module.get_keyring()).__module__
    if "Windows" in name:
        return "Windows Credential Manager"
    if "macOS" in name:
        return "the macOS Keychain"
    if "SecretService" in name or "libsecret" in name:
        return "the Secret Service (your desktop's keyring)"
    if "kwallet" in name:
        return "KWallet"
    return "the system's credential store"
