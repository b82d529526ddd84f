"""The Wayland global shortcut: xdg-desktop-portal's org.freedesktop.portal.GlobalShortcuts.

A worker thread owns its own D-Bus connection and GLib main context end to end: it checks the
interface's version, creates a session, binds the shortcut (each answered through a Request object's
Response signal) and then turns Activated for our shortcut into a queued press. The GUI thread never
waits on D-Bus. The session lives as long as the connection, so release() ends both.
"""

from __future__ import annotations

import ctypes
import os
import threading

from PySide6.QtCore import QObject

from app.ui.quick_ask.shortcuts.gio import (
    CONNECTION_FLAGS,
    SESSION_BUS,
    SIGNAL_CALLBACK,
    GError,
    GioFailed,
    libgio,
    raise_error,
    variant_text,
)
from app.ui.quick_ask.shortcuts.key_sequence import SETTINGS_PLACE, Unusable, portal_trigger
from app.ui.quick_ask.shortcuts.shortcut import ShortcutStatus, ShortcutWorker, ThreadedShortcut, ThreadReports, held_words

PORTAL_NAME = "org.freedesktop.portal.Desktop"
PORTAL_PATH = "/org/freedesktop/portal/desktop"
SHORTCUTS_INTERFACE = "org.freedesktop.portal.GlobalShortcuts"
SHORTCUT_ID = "quick-ask"
_BIND_YOURSELF = "add a shortcut that runs \"kestrel ask\" in your desktop's own keyboard settings"
_CALL_TIMEOUT_MS = 10_000


class PortalShortcut(ThreadedShortcut):
    """A shortcut the desktop grants through the GlobalShortcuts portal."""

    def __init__(self, parent: QObject | None = None, bus_address: str | None = None) -> None:
        super().__init__(parent)
        self._bus_address = bus_address

    def _make_worker(self, sequence: str, generation: int,
                     previous: ShortcutWorker | None) -> ShortcutWorker | Unusable:
        """Override ThreadedShortcut._make_worker: a new session on a new connection (a session binds once)."""
        trigger = portal_trigger(sequence)
        if isinstance(trigger, Unusable):
            return trigger
        return _PortalWorker(self._bus_address, sequence, trigger, generation, self._reports, previous)


class _PortalWorker(threading.Thread):
    """One connection, one GLib main context, one portal session."""

    def __init__(self, bus_address: str | None, sequence: str, trigger: str, generation: int,
                 reports: ThreadReports, previous: ShortcutWorker | None) -> None:
        super().__init__(name=f"portal shortcut {sequence}", daemon=True)
        self._bus_address = bus_address
        self._sequence = sequence
        self._trigger = trigger
        self._generation = generation
        self._reports = reports
        self._previous = previous
        self._stopping = threading.Event()
        self._context_lock = threading.Lock()
        self._context: int | None = None  # for request_stop's wake-up, under the lock
        self._loop: int | None = None  # the same context, for this thread's own iterations
        self._tokens = 0
        self._awaited: set[str] = set()
        self._response: tuple[int, int | None] | None = None
        self._session = ""
        self._on_signal = SIGNAL_CALLBACK(self._signal)  # kept: GLib holds only the C pointer

    def request_stop(self) -> None:
        """Ask the thread to end; wakes its main context if it is waiting."""
        self._stopping.set()
        with self._context_lock:
            if self._context is not None:
                libgio().g_main_context_wakeup(self._context)

    def run(self) -> None:
        """Override Thread.run."""
        if self._previous is not None:
            self._previous.join()
        try:
            lib = libgio()
        except OSError:
            self._report(ShortcutStatus(False, f"Kestrel could not load GIO to reach the desktop's portal: {_BIND_YOURSELF}."))
            return
        context = lib.g_main_context_new()
        lib.g_main_context_push_thread_default(context)
        with self._context_lock:
            self._context = context
        self._loop = context
        try:
            self._connect_and_serve(lib)
        except GioFailed as failure:
            self._report(ShortcutStatus(False, f"Kestrel could not reach the desktop's portal ({failure}): {_BIND_YOURSELF}."))
        finally:
            with self._context_lock:
                self._context = None
            lib.g_main_context_pop_thread_default(context)
            lib.g_main_context_unref(context)

    def _connect_and_serve(self, lib: ctypes.CDLL) -> None:
        error = ctypes.POINTER(GError)()
        address = self._bus_address.encode() if self._bus_address else None
        found = None
        if address is None:
            found = lib.g_dbus_address_get_for_bus_sync(SESSION_BUS, None, ctypes.byref(error))
            if not found:
                raise_error(lib, error)
            address = ctypes.cast(found, ctypes.c_char_p).value
        connection = lib.g_dbus_connection_new_for_address_sync(address, CONNECTION_FLAGS, None, None, ctypes.byref(error))
        if found:
            lib.g_free(found)
        if not connection:
            raise_error(lib, error)
        try:
            self._serve(lib, connection)
        finally:
            lib.g_dbus_connection_close_sync(connection, None, None)
            lib.g_object_unref(connection)

    def _serve(self, lib: ctypes.CDLL, connection: int) -> None:
        """Version, session, binding, then presses until stopped."""
        version = self._version(lib, connection)
        if version is None:
            self._report(ShortcutStatus(False, f"This desktop's portal offers no global shortcuts, so Kestrel cannot "
                                               f"listen for {self._sequence}: {_BIND_YOURSELF}."))
            return
        if version < 1:
            self._report(ShortcutStatus(False, f"This desktop's portal is too old for global shortcuts (version "
                                               f"{version}): update the desktop, or {_BIND_YOURSELF}."))
            return
        unique = (lib.g_dbus_connection_get_unique_name(connection) or b"").decode()
        sender = unique.lstrip(":").replace(".", "_")
        token = self._token()
        created = self._request(lib, connection, sender, token, "CreateSession", variant_text(
            ({"handle_token": token, "session_handle_token": self._token()},)))
        if created is None:
            return
        code, session = created
        if code != 0 or not session:
            self._report(self._refused(code))
            return
        subscription = lib.g_dbus_connection_signal_subscribe(
            connection, PORTAL_NAME.encode(), SHORTCUTS_INTERFACE.encode(), b"Activated", PORTAL_PATH.encode(),
            None, 0, self._on_signal, None, None)
        self._session = session
        try:
            shortcuts = [(SHORTCUT_ID, {"description": "Open Kestrel's quick ask", "preferred_trigger": self._trigger})]
            token = self._token()
            bound = self._request(lib, connection, sender, token, "BindShortcuts", "(@o {}, @a(sa{{sv}}) {}, '', {})".format(
                variant_text(session), variant_text(shortcuts), variant_text({"handle_token": token})))
            if bound is None:
                return
            if bound[0] != 0:
                self._report(self._refused(bound[0]))
                return
            self._report(held_words(self._sequence))
            while not self._stopping.is_set():
                lib.g_main_context_iteration(self._loop, 1)
        finally:
            lib.g_dbus_connection_signal_unsubscribe(connection, subscription)

    def _version(self, lib: ctypes.CDLL, connection: int) -> int | None:
        """The interface's version property; None where there is no portal or no such interface."""
        try:
            reply = self._call(lib, connection, "org.freedesktop.DBus.Properties", "Get",
                               f"({variant_text(SHORTCUTS_INTERFACE)}, 'version')")
        except GioFailed:
            return None
        boxed = lib.g_variant_get_child_value(reply, 0)
        inner = lib.g_variant_get_variant(boxed)
        version = int(lib.g_variant_get_uint32(inner))
        for value in (inner, boxed, reply):
            lib.g_variant_unref(value)
        return version

    def _request(self, lib: ctypes.CDLL, connection: int, sender: str, token: str, method: str,
                 parameters: str) -> tuple[int, str] | None:
        """Call a portal method and wait (on this thread) for its Response: (code, session handle or "").

        None when stopped first. Subscribed before the call, as the spec asks, to the path the handle
        will have; the handle the call returns is awaited too, for portals older than handle_token.
        """
        self._awaited = {f"{PORTAL_PATH}/request/{sender}/{token}"}
        self._response = None
        subscription = lib.g_dbus_connection_signal_subscribe(
            connection, PORTAL_NAME.encode(), b"org.freedesktop.portal.Request", b"Response", None, None, 0,
            self._on_signal, None, None)
        try:
            reply = self._call(lib, connection, SHORTCUTS_INTERFACE, method, parameters)
            handle = lib.g_variant_get_child_value(reply, 0)
            self._awaited.add((lib.g_variant_get_string(handle, None) or b"").decode())
            lib.g_variant_unref(handle)
            lib.g_variant_unref(reply)
            while self._response is None and not self._stopping.is_set():
                lib.g_main_context_iteration(self._loop, 1)
        finally:
            lib.g_dbus_connection_signal_unsubscribe(connection, subscription)
        if self._response is None:
            return None
        code, results = self._response
        session = ""
        if results:
            found = lib.g_variant_lookup_value(results, b"session_handle", None)
            if found:
                session = (lib.g_variant_get_string(found, None) or b"").decode()
                lib.g_variant_unref(found)
            lib.g_variant_unref(results)
        return code, session

    def _call(self, lib: ctypes.CDLL, connection: int, interface: str, method: str, parameters: str) -> int:
        """A method call to the portal from this thread; its reply (to unref), or GioFailed."""
        error = ctypes.POINTER(GError)()
        arguments = lib.g_variant_parse(None, parameters.encode(), None, None, ctypes.byref(error))
        if not arguments:
            raise_error(lib, error)
        reply = lib.g_dbus_connection_call_sync(connection, PORTAL_NAME.encode(), PORTAL_PATH.encode(),
                                                interface.encode(), method.encode(), arguments, None, 0,
                                                _CALL_TIMEOUT_MS, None, ctypes.byref(error))
        if not reply:
            raise_error(lib, error)
        return int(reply)

    def _signal(self, connection: int, sender: bytes, path: bytes, interface: bytes, name: bytes,
                parameters: int, user_data: int) -> None:
        """A D-Bus signal, on this thread while it iterates its context."""
        lib = libgio()
        if name == b"Response" and path.decode() in self._awaited and self._response is None:
            code_value = lib.g_variant_get_child_value(parameters, 0)
            code = int(lib.g_variant_get_uint32(code_value))
            lib.g_variant_unref(code_value)
            self._response = (code, lib.g_variant_get_child_value(parameters, 1))
        elif name == b"Activated" and _strings(lib, parameters, 2) == [self._session, SHORTCUT_ID]:
            self._reports.pressed.emit(self._generation)

    def _refused(self, code: int) -> ShortcutStatus:
        if code == 1:
            return ShortcutStatus(False, f"{self._sequence} was not allowed: it was cancelled in the desktop's own "
                                         f"dialog. Choose it again in {SETTINGS_PLACE}, or {_BIND_YOURSELF}.")
        return ShortcutStatus(False, f"The desktop refused {self._sequence} as a global shortcut: choose another in "
                                     f"{SETTINGS_PLACE}, or {_BIND_YOURSELF}.")

    def _token(self) -> str:
        self._tokens += 1
        return f"kestrel_{os.getpid()}_{self._generation}_{self._tokens}"

    def _report(self, status: ShortcutStatus) -> None:
        self._reports.reported.emit(self._generation, status)


def _strings(lib: ctypes.CDLL, parameters: int, count: int) -> list[str]:
    """The first count members of a signal's parameters, each a string or an object path."""
    found = []
    for index in range(count):
        member = lib.g_variant_get_child_value(parameters, index)
        found.append((lib.g_variant_get_string(member, None) or b"").decode())
        lib.g_variant_unref(member)
    return found
