"""Keeps llama.cpp's own log lines instead of letting them spill onto the user's terminal."""

from __future__ import annotations

import ctypes
import threading
from collections import deque

import llama_cpp

# ggml_log_level in the llama.cpp this wheel builds: DEBUG=1, INFO=2, WARN=3, ERROR=4, CONT=5.
_ERROR = 4
_lines: deque[tuple[int, str]] = deque(maxlen=200)
_lock = threading.Lock()


@llama_cpp.llama_log_callback
def _keep(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    line = text.decode("utf-8", errors="replace").rstrip()
    if line:
        with _lock:
            _lines.append((level, line))


def capture() -> None:
    """Route llama.cpp's log into a ring buffer (the callback object lives at module level)."""
    llama_cpp.llama_log_set(_keep, ctypes.c_void_p(0))


def capture_mtmd() -> None:
    """Route libmtmd's log (the projector's loader, its image decoding) into the same buffer."""
    import llama_cpp.mtmd_cpp as mtmd

    mtmd.mtmd_log_set(_keep, ctypes.c_void_p(0))
    mtmd.mtmd_helper_log_set(_keep, ctypes.c_void_p(0))


def recent_errors(limit: int = 3) -> list[str]:
    """The last error lines llama.cpp logged: the real reason behind a failed load."""
    with _lock:
        errors = [line for level, line in _lines if level == _ERROR]
    return errors[-limit:]


def clear() -> None:
    with _lock:
        _lines.clear()
