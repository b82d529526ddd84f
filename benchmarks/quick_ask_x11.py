"""What benchmarks/quick_ask.py needs of an X server beyond xdotool: the active window and the
quick-ask window's map and unmap events, read through libX11 (ctypes) on a connection of its own,
so the clock is not a process start per look (an `xdotool getactivewindow` costs a few ms)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import subprocess
import time

STRUCTURE_NOTIFY_MASK = 1 << 17
UNMAP_NOTIFY, MAP_NOTIFY = 18, 19
XA_WINDOW = 33


class XWatch:
    """One connection to `display`: `active()` reads the root's _NET_ACTIVE_WINDOW (what
    `xdotool getactivewindow` reads), `watch(window)` asks for its map/unmap events and
    `heard()` gives those received since, each with the wall-clock time it was read."""

    def __init__(self, display: str) -> None:
        lib = ctypes.CDLL(ctypes.util.find_library("X11") or "libX11.so.6")
        p, i, ul = ctypes.c_void_p, ctypes.c_int, ctypes.c_ulong
        lib.XOpenDisplay.argtypes, lib.XOpenDisplay.restype = [ctypes.c_char_p], p
        lib.XDefaultRootWindow.argtypes, lib.XDefaultRootWindow.restype = [p], ul
        lib.XInternAtom.argtypes, lib.XInternAtom.restype = [p, ctypes.c_char_p, i], ul
        lib.XGetWindowProperty.argtypes = [p, ul, ul, ctypes.c_long, ctypes.c_long, i, ul,
                                           ctypes.POINTER(ul), ctypes.POINTER(i), ctypes.POINTER(ul),
                                           ctypes.POINTER(ul), ctypes.POINTER(p)]
        lib.XGetWindowProperty.restype = i
        lib.XFree.argtypes, lib.XFree.restype = [p], i
        lib.XSelectInput.argtypes, lib.XSelectInput.restype = [p, ul, ctypes.c_long], i
        lib.XPending.argtypes, lib.XPending.restype = [p], i
        lib.XNextEvent.argtypes, lib.XNextEvent.restype = [p, p], i
        lib.XFlush.argtypes, lib.XFlush.restype = [p], i
        lib.XCloseDisplay.argtypes, lib.XCloseDisplay.restype = [p], i
        self._lib = lib
        self._display = lib.XOpenDisplay(display.encode())
        if not self._display:
            raise RuntimeError(f"cannot open X display {display}")
        self._root = lib.XDefaultRootWindow(self._display)
        self._active_atom = lib.XInternAtom(self._display, b"_NET_ACTIVE_WINDOW", 0)
        self._event = (ctypes.c_long * 24)()  # XEvent: 24 longs; its first int is the type

    def active(self) -> int:
        """The window the window manager says is active (0: none)."""
        kind, form, items, after = ctypes.c_ulong(), ctypes.c_int(), ctypes.c_ulong(), ctypes.c_ulong()
        data = ctypes.c_void_p()
        self._lib.XGetWindowProperty(self._display, self._root, self._active_atom, 0, 1, 0, XA_WINDOW,
                                     ctypes.byref(kind), ctypes.byref(form), ctypes.byref(items),
                                     ctypes.byref(after), ctypes.byref(data))
        if not data.value:
            return 0
        try:
            return int(ctypes.cast(data, ctypes.POINTER(ctypes.c_ulong))[0]) if items.value else 0
        finally:
            self._lib.XFree(data)

    def watch(self, window: int) -> None:
        self._lib.XSelectInput(self._display, window, STRUCTURE_NOTIFY_MASK)
        self._lib.XFlush(self._display)

    def heard(self) -> list[tuple[int, float]]:
        """(event type, wall-clock time read) of each event come since the last call."""
        got = []
        while self._lib.XPending(self._display):
            self._lib.XNextEvent(self._display, ctypes.byref(self._event))
            got.append((ctypes.cast(self._event, ctypes.POINTER(ctypes.c_int))[0], time.time()))
        return got

    def close(self) -> None:
        self._lib.XCloseDisplay(self._display)


def xdotool(display: str, *args: str, timeout: float = 15.0) -> str:
    done = subprocess.run(["xdotool", *args], env={**os.environ, "DISPLAY": display},
                          capture_output=True, text=True, timeout=timeout)
    return done.stdout


def press(display: str, keys: str) -> subprocess.Popen[bytes]:
    """Start pressing keys (xdotool's names) without waiting: the caller's clock runs meanwhile."""
    return subprocess.Popen(["xdotool", "key", "--clearmodifiers", keys], env={**os.environ, "DISPLAY": display},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def windows_of(display: str, pid: int) -> list[int]:
    """The visible top-level windows whose _NET_WM_PID is pid."""
    return [int(w) for w in xdotool(display, "search", "--onlyvisible", "--pid", str(pid)).split()]


def geometry(display: str, window: int) -> dict[str, int]:
    """X, Y, WIDTH, HEIGHT of a window, as xdotool says them."""
    shell = xdotool(display, "getwindowgeometry", "--shell", str(window))
    return {k: int(v) for k, v in (line.split("=", 1) for line in shell.split()) if k in ("X", "Y", "WIDTH", "HEIGHT")}
