"""The X11 global shortcut: a key grab on the root window, on a connection and a thread of its own.

Why its own connection and thread: the grab must be read whatever Qt runs on (xcb, or offscreen in
the tests), and a thread that owns one Display from XOpenDisplay to XCloseDisplay never shares Xlib
state with Qt. libX11 1.8 and later initialise Xlib's threads themselves; XInitThreads is not called
here because calling it after other Xlib use is what its manual forbids on older ones.
"""

from __future__ import annotations

import ctypes
import os
import select
import socket
import threading

from PySide6.QtCore import QObject

from app.ui.quick_ask.shortcuts.key_sequence import SETTINGS_PLACE, Unusable, X11Combination, X11_LOCK, x11_combination
from app.ui.quick_ask.shortcuts.shortcut import (
    ShortcutStatus,
    ShortcutWorker,
    ThreadedShortcut,
    ThreadReports,
    held_words,
    taken_words,
)
from app.ui.quick_ask.shortcuts.xlib import (
    BAD_ACCESS,
    ERROR_HANDLER,
    GRAB_MODE_ASYNC,
    KEY_PRESS,
    KEY_RELEASE,
    XErrorEvent,
    XEvent,
    libx11,
    lock_masks,
)

# How long the listening loop waits on the connection before it looks at the stop flag again.
_POLL_SECONDS = 0.05

# Xlib's error handler is one per process: it is swapped in only around a grab, under this lock, and
# records the errors instead of letting Xlib's default handler end the process.
_grab_lock = threading.Lock()
_errors: list[tuple[int, int]] = []


@ERROR_HANDLER
def _record_error(display: int | None, event: ctypes._Pointer[XErrorEvent]) -> int:
    _errors.append((display or 0, event.contents.error_code))
    return 0


class X11KeyGrab(ThreadedShortcut):
    """A key combination grabbed on the X display's root window."""

    def __init__(self, parent: QObject | None = None, display_name: str | None = None) -> None:
        super().__init__(parent)
        self._display_name = os.environ.get("DISPLAY", "") if display_name is None else display_name

    def _make_worker(self, sequence: str, generation: int,
                     previous: ShortcutWorker | None) -> ShortcutWorker | Unusable:
        """Override ThreadedShortcut._make_worker: a worker that grabs the combination on the root window."""
        combination = x11_combination(sequence)
        if isinstance(combination, Unusable):
            return combination
        return _GrabWorker(self._display_name, sequence, combination, generation, self._reports, previous)


class _GrabWorker(threading.Thread):
    """Owns one X connection end to end: open, grab, listen, ungrab, close."""

    def __init__(self, display_name: str, sequence: str, combination: X11Combination, generation: int,
                 reports: ThreadReports, previous: ShortcutWorker | None) -> None:
        super().__init__(name=f"X11 shortcut {sequence}", daemon=True)
        self.stop = threading.Event()
        self.request_stop = self.stop.set  # ShortcutWorker: ask it to end, without waiting
        self._display_name = display_name
        self._sequence = sequence
        self._combination = combination
        self._generation = generation
        self._reports = reports
        self._previous = previous

    def run(self) -> None:
        """Override Thread.run."""
        if self._previous is not None:
            self._previous.join()  # its grab must be gone before this one asks for the same keys
        try:
            lib = libx11()
        except OSError:
            self._report(ShortcutStatus(False, "Kestrel could not load libX11, which an X11 desktop has: "
                                               "bind \"kestrel ask\" in your desktop's keyboard settings instead."))
            return
        display = lib.XOpenDisplay(self._display_name.encode())
        if not display:
            self._report(ShortcutStatus(False, f"Kestrel could not reach the X display {self._display_name!r} to "
                                               f"listen for {self._sequence}. Restart Kestrel in your desktop session."))
            return
        keycode, server_gone = 0, False
        masks: list[int] = []
        try:
            keycode, masks, status = self._grab(lib, display)
            self._report(status)
            if status.held:
                server_gone = self._listen(lib, display, keycode)
        finally:
            if not server_gone:
                for mask in masks:
                    lib.XUngrabKey(display, keycode, mask, lib.XDefaultRootWindow(display))
                lib.XCloseDisplay(display)

    def _grab(self, lib: ctypes.CDLL, display: int) -> tuple[int, list[int], ShortcutStatus]:
        """Grab the combination with and without the lock keys; a refusal comes back as words."""
        keycode = lib.XKeysymToKeycode(display, self._combination.keysym)
        if not keycode:
            return 0, [], ShortcutStatus(False, f"This keyboard has no key for {self._sequence}: choose another "
                                                f"shortcut in {SETTINGS_PLACE}.")
        num_lock, scroll_lock = lock_masks(lib, display)
        masks = sorted({self._combination.modifier_mask | lock | num | scroll
                        for lock in (0, X11_LOCK) for num in (0, num_lock) for scroll in (0, scroll_lock)})
        root = lib.XDefaultRootWindow(display)
        with _grab_lock:
            _errors.clear()
            previous = lib.XSetErrorHandler(ctypes.cast(_record_error, ctypes.c_void_p))
            try:
                for mask in masks:
                    lib.XGrabKey(display, keycode, mask, root, 0, GRAB_MODE_ASYNC, GRAB_MODE_ASYNC)
                lib.XSync(display, 0)
            finally:
                lib.XSetErrorHandler(previous)
            codes = [code for source, code in _errors if source == display]
        if not codes:
            return keycode, masks, held_words(self._sequence)
        for mask in masks:  # any part that was granted goes back: half a shortcut is none
            lib.XUngrabKey(display, keycode, mask, root)
        lib.XSync(display, 0)
        if BAD_ACCESS in codes:
            return keycode, [], taken_words(self._sequence)
        return keycode, [], ShortcutStatus(False, f"The X server refused {self._sequence} (error {codes[0]}): "
                                                  f"choose another shortcut in {SETTINGS_PLACE}.")

    def _listen(self, lib: ctypes.CDLL, display: int, keycode: int) -> bool:
        """Emit a press for each KeyPress until stopped; True when the X server went away."""
        lib.XkbSetDetectableAutoRepeat(display, 1, None)  # a held key repeats presses, not press+release
        fd = lib.XConnectionNumber(display)
        event = XEvent()
        down = False
        with socket.socket(fileno=os.dup(fd)) as peek:
            while not self.stop.is_set():
                readable = bool(select.select([fd], [], [], _POLL_SECONDS)[0])
                if readable and _closed(peek):
                    self._report(ShortcutStatus(False, "The X server closed Kestrel's connection, so the shortcut "
                                                       "is off. Restart Kestrel in your desktop session."))
                    return True
                while (lib.XPending(display) if readable else lib.XQLength(display)) > 0:
                    lib.XNextEvent(display, ctypes.byref(event))
                    if event.xkey.keycode != keycode:
                        continue
                    if event.type == KEY_PRESS and not down:
                        self._reports.pressed.emit(self._generation)
                    down = event.type == KEY_PRESS or (down and event.type != KEY_RELEASE)
        return False

    def _report(self, status: ShortcutStatus) -> None:
        self._reports.reported.emit(self._generation, status)


def _closed(peek: socket.socket) -> bool:
    """Whether the server end of the connection is closed (Xlib would exit the process on reading it)."""
    try:
        return peek.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
