"""The pairing code waiting on this PC (pairing.json): one at a time, for 10 minutes, used once, wrong tries limited.

Kept in a file, not in memory, so that a code made by `kestrel link code` is the one the window's
sharing server (or `kestrel serve --share`) takes, and the window shows the one the CLI made.
The code's scheme: app/library/servers/link_code.py.
"""

from __future__ import annotations

import hmac
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from app.core.files import exclusive_lock, write_atomically
from app.library.servers.link_code import PairingCode, new_code, read_code

PAIRING_FILE = "pairing.json"
CODE_LIFETIME_S = 10 * 60
WRONG_TRIES = 5  # at most this many wrong codes in WRONG_WINDOW_S, then every try waits
WRONG_WINDOW_S = 60.0


@dataclass(frozen=True)
class WaitingCode:
    """The code shown now, the fingerprint it binds, and when it stops being taken (time.time())."""

    text: str
    fingerprint: str
    expires: float

    def seconds_left(self, now: float) -> int:
        return max(0, int(self.expires - now))


class Redeemed(Enum):
    """How a code someone sent was taken."""

    TAKEN = "taken"  # right, in time: it is used up now
    WRONG = "wrong"
    EXPIRED = "expired"
    NONE_WAITING = "none_waiting"  # no code was made, or the last one was used
    TOO_MANY = "too_many"  # too many wrong tries lately: not even looked at


class PairingCodes:
    """Makes, shows and takes the pairing code. clock: time.time, or a test's."""

    def __init__(self, folder: Path, clock: Callable[[], float] = time.time) -> None:
        self.path = folder / PAIRING_FILE
        self._clock = clock

    def make(self, fingerprint: str) -> WaitingCode:
        """A new code for the certificate of this fingerprint; the one before it is taken no more."""
        code = new_code(fingerprint)
        waiting = WaitingCode(code.text, fingerprint, self._clock() + CODE_LIFETIME_S)
        with self._changing() as state:
            state["code"] = {"text": waiting.text, "fingerprint": fingerprint, "expires": waiting.expires}
        return waiting

    def waiting(self) -> WaitingCode | None:
        """The code that would be taken now, or None (none made, used, or expired)."""
        code = _code_of(self._read())
        return code if code is not None and code.expires > self._clock() else None

    def cancel(self) -> None:
        """Take no code any more (sharing turned off)."""
        with self._changing() as state:
            state.pop("code", None)

    def redeem(self, typed: str, fingerprint: str) -> Redeemed:
        """Take the code someone sent, if it is the one waiting for this certificate, in time, once."""
        with self._changing() as state:
            now = self._clock()
            wrong = [t for t in state.get("wrong", []) if isinstance(t, (int, float)) and now - t < WRONG_WINDOW_S]
            state["wrong"] = wrong
            if len(wrong) >= WRONG_TRIES:
                return Redeemed.TOO_MANY
            code = _code_of(state)
            if code is None or code.fingerprint != fingerprint:
                return Redeemed.NONE_WAITING
            if code.expires <= now:
                state.pop("code", None)
                return Redeemed.EXPIRED
            if not _same(typed, code.text):
                wrong.append(now)
                return Redeemed.WRONG
            state.pop("code", None)  # used once
            return Redeemed.TAKEN

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return {}
        return data if isinstance(data, dict) else {}

    @contextmanager
    def _changing(self) -> Iterator[dict[str, Any]]:
        with exclusive_lock(self.path.with_name(f".{self.path.name}.lock")):
            state = self._read()
            yield state
            write_atomically(self.path, (json.dumps(state) + "\n").encode("utf-8"))
            if sys.platform != "win32":
                os.chmod(self.path, 0o600)


def _code_of(state: dict[str, Any]) -> WaitingCode | None:
    code = state.get("code")
    try:
        return WaitingCode(str(code["text"]), str(code["fingerprint"]), float(code["expires"]))  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        return None


def _same(typed: str, shown: str) -> bool:
    try:
        given: PairingCode = read_code(typed)
    except ValueError:
        return False
    return hmac.compare_digest(given.text, shown)
