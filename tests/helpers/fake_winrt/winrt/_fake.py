"""The fake's configuration, read from the JSON file named in KESTREL_FAKE_WINRT (each time: a test may change it)."""

from __future__ import annotations

import json
import os
from typing import Any


class Operation:
    """IAsyncOperation: get() blocks until the result (here: it is there at once)."""

    def __init__(self, result: Any) -> None:
        self._result = result

    def get(self) -> Any:
        return self._result


def config() -> dict[str, Any]:
    path = os.environ.get("KESTREL_FAKE_WINRT")
    if not path:
        return {"voices": []}
    with open(path, encoding="utf-8") as file:
        data: dict[str, Any] = json.load(file)
    return data


def fail(when: str) -> None:
    """Raise OSError as PyWinRT does for a failed HRESULT (winerror: the signed HRESULT) if the test asks."""
    code = (config().get("fail") or {}).get(when)
    if code is not None:
        raise hresult_error("The system cannot find the file specified.", int(code))


def hresult_error(message: str, code: int) -> OSError:
    """OSError(0, message, None, hresult), as PyWinRT raises it. Only Windows' Python fills winerror from the
    fourth argument; here it is set by hand, to what it would be."""
    error = OSError(0, message, None, code)
    error.winerror = code  # type: ignore[attr-defined]
    return error


def log(entry: dict[str, Any]) -> None:
    path = config().get("log")
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(json.dumps(entry, ensure_ascii=False) + "\n")
