"""The few libX11 calls a root-window key grab needs, through ctypes (libX11 is on every X desktop)."""

from __future__ import annotations

import ctypes
import ctypes.util
import threading

KEY_PRESS, KEY_RELEASE = 2, 3
GRAB_MODE_ASYNC = 1
BAD_ACCESS = 10
NUM_LOCK_KEYSYM, SCROLL_LOCK_KEYSYM = 0xFF7F, 0xFF14


class XKeyEvent(ctypes.Structure):
    """Xlib.h's XKeyEvent (the fields up to keycode are all a grab reads)."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("serial", ctypes.c_ulong),
        ("send_event", ctypes.c_int),
        ("display", ctypes.c_void_p),
        ("window", ctypes.c_ulong),
        ("root", ctypes.c_ulong),
        ("subwindow", ctypes.c_ulong),
        ("time", ctypes.c_ulong),
        ("x", ctypes.c_int),
        ("y", ctypes.c_int),
        ("x_root", ctypes.c_int),
        ("y_root", ctypes.c_int),
        ("state", ctypes.c_uint),
        ("keycode", ctypes.c_uint),
        ("same_screen", ctypes.c_int),
    ]


class XEvent(ctypes.Union):
    """Xlib.h's XEvent: 24 longs, read here only as a key event."""

    _fields_ = [("type", ctypes.c_int), ("xkey", XKeyEvent), ("pad", ctypes.c_long * 24)]


class XErrorEvent(ctypes.Structure):
    """Xlib.h's XErrorEvent."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("display", ctypes.c_void_p),
        ("resourceid", ctypes.c_ulong),
        ("serial", ctypes.c_ulong),
        ("error_code", ctypes.c_ubyte),
        ("request_code", ctypes.c_ubyte),
        ("minor_code", ctypes.c_ubyte),
    ]


class XModifierKeymap(ctypes.Structure):
    """Xlib.h's XModifierKeymap: 8 modifiers × max_keypermod keycodes."""

    _fields_ = [("max_keypermod", ctypes.c_int), ("modifiermap", ctypes.POINTER(ctypes.c_ubyte))]


ERROR_HANDLER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(XErrorEvent))

_loaded: ctypes.CDLL | None = None
_load_lock = threading.Lock()


def libx11() -> ctypes.CDLL:
    """libX11 with the signatures used here, loaded once; OSError where it is missing."""
    global _loaded
    with _load_lock:
        if _loaded is None:
            _loaded = _declare(ctypes.CDLL(ctypes.util.find_library("X11") or "libX11.so.6"))
        return _loaded


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    """Give each function its argument and result types (a pointer must not be cut to an int)."""
    p, i, u, ul = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_ulong
    signatures: dict[str, tuple[list[object], object]] = {
        "XOpenDisplay": ([ctypes.c_char_p], p),
        "XCloseDisplay": ([p], i),
        "XDefaultRootWindow": ([p], ul),
        "XConnectionNumber": ([p], i),
        "XKeysymToKeycode": ([p, ul], ctypes.c_ubyte),
        "XGrabKey": ([p, i, u, ul, i, i, i], i),
        "XUngrabKey": ([p, i, u, ul], i),
        "XSync": ([p, i], i),
        "XPending": ([p], i),
        "XQLength": ([p], i),
        "XNextEvent": ([p, ctypes.POINTER(XEvent)], i),
        "XSetErrorHandler": ([p], p),
        "XGetModifierMapping": ([p], ctypes.POINTER(XModifierKeymap)),
        "XFreeModifiermap": ([ctypes.POINTER(XModifierKeymap)], i),
        "XkbSetDetectableAutoRepeat": ([p, i, p], i),
    }
    for name, (argtypes, restype) in signatures.items():
        function = getattr(lib, name)
        function.argtypes = argtypes
        function.restype = restype
    return lib


def lock_masks(lib: ctypes.CDLL, display: int) -> tuple[int, int]:
    """The modifier bits NumLock and ScrollLock sit on in this keymap (0 where a key is on none)."""
    found = {NUM_LOCK_KEYSYM: 0, SCROLL_LOCK_KEYSYM: 0}
    codes = {keysym: lib.XKeysymToKeycode(display, keysym) for keysym in found}
    mapping = lib.XGetModifierMapping(display)
    if not mapping:
        return 0, 0
    try:
        per_modifier = mapping.contents.max_keypermod
        for modifier in range(8):
            for slot in range(per_modifier):
                code = mapping.contents.modifiermap[modifier * per_modifier + slot]
                for keysym, keycode in codes.items():
                    if code and code == keycode:
                        found[keysym] = 1 << modifier
    finally:
        lib.XFreeModifiermap(mapping)
    return found[NUM_LOCK_KEYSYM], found[SCROLL_LOCK_KEYSYM]
