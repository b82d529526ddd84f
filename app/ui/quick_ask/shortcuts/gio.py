"""The few GIO (GDBus) calls the portal needs, through ctypes.

Why GIO and not PySide6's QtDBus: BindShortcuts takes an a(sa{sv}), and QtDBus marshals an array of
structures only for a C++ type registered with qDBusRegisterMetaType, which PySide6 cannot do
(QDBusArgument.beginArray needs a registered element type; Qt registers none with the signature
(sa{sv})). GDBus reads a GVariant from its text form, and libgio is on every desktop that runs
xdg-desktop-portal, which is built on it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading

SESSION_BUS = 2  # G_BUS_TYPE_SESSION
CONNECTION_FLAGS = (1 << 0) | (1 << 3)  # AUTHENTICATION_CLIENT | MESSAGE_BUS_CONNECTION

SIGNAL_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                   ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p)


class GError(ctypes.Structure):
    """GLib's GError."""

    _fields_ = [("domain", ctypes.c_uint32), ("code", ctypes.c_int), ("message", ctypes.c_char_p)]


_loaded: ctypes.CDLL | None = None
_load_lock = threading.Lock()


def libgio() -> ctypes.CDLL:
    """libgio-2.0 with the signatures used here, loaded once; OSError where it is missing."""
    global _loaded
    with _load_lock:
        if _loaded is None:
            _loaded = _declare(ctypes.CDLL(ctypes.util.find_library("gio-2.0") or "libgio-2.0.so.0"))
        return _loaded


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    """Give each function its argument and result types (a pointer must not be cut to an int)."""
    p, s, i, u = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint
    err = ctypes.POINTER(ctypes.POINTER(GError))
    signatures: dict[str, tuple[list[object], object]] = {
        "g_dbus_address_get_for_bus_sync": ([i, p, err], p),
        "g_dbus_connection_new_for_address_sync": ([s, i, p, p, err], p),
        "g_dbus_connection_get_unique_name": ([p], s),
        "g_dbus_connection_call_sync": ([p, s, s, s, s, p, p, i, i, p, err], p),
        "g_dbus_connection_signal_subscribe": ([p, s, s, s, s, s, i, SIGNAL_CALLBACK, p, p], u),
        "g_dbus_connection_signal_unsubscribe": ([p, u], None),
        "g_dbus_connection_close_sync": ([p, p, err], i),
        "g_object_unref": ([p], None),
        "g_variant_parse": ([p, s, p, p, err], p),
        "g_variant_ref_sink": ([p], p),
        "g_variant_unref": ([p], None),
        "g_variant_get_child_value": ([p, ctypes.c_size_t], p),
        "g_variant_get_variant": ([p], p),
        "g_variant_get_uint32": ([p], ctypes.c_uint32),
        "g_variant_get_string": ([p, p], s),
        "g_variant_lookup_value": ([p, s, p], p),
        "g_main_context_new": ([], p),
        "g_main_context_push_thread_default": ([p], None),
        "g_main_context_pop_thread_default": ([p], None),
        "g_main_context_iteration": ([p, i], i),
        "g_main_context_wakeup": ([p], None),
        "g_main_context_unref": ([p], None),
        "g_error_free": ([ctypes.POINTER(GError)], None),
        "g_free": ([p], None),
    }
    for name, (argtypes, restype) in signatures.items():
        function = getattr(lib, name)
        function.argtypes = argtypes
        function.restype = restype
    return lib


class GioFailed(Exception):
    """A GIO call failed; the message is GLib's own."""


def raise_error(lib: ctypes.CDLL, error: ctypes._Pointer[GError]) -> None:
    """Raise GioFailed with the error's message, freeing it."""
    message = (error.contents.message or b"").decode("utf-8", "replace")
    lib.g_error_free(error)
    raise GioFailed(message)


def variant_text(value: object) -> str:
    """GVariant text for a str, an int (as uint32) or a dict of those (as a{sv}) or a list of tuples."""
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, bool) or not isinstance(value, (int, dict, list, tuple)):
        raise TypeError(f"no GVariant text for {value!r}")
    if isinstance(value, int):
        return f"uint32 {value}"
    if isinstance(value, dict):
        entries = ", ".join(f"{variant_text(key)}: <{variant_text(item)}>" for key, item in value.items())
        return "@a{sv} {" + entries + "}"
    return ("[" if isinstance(value, list) else "(") + ", ".join(variant_text(item) for item in value) + \
        ("]" if isinstance(value, list) else (",)" if len(value) == 1 else ")"))
