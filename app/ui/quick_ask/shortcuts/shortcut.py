"""What every global shortcut offers (bind, release, activated, a status in words), and the one for none."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from PySide6.QtCore import QObject, Qt, Signal

from app.ui.quick_ask.shortcuts.key_sequence import SETTINGS_PLACE, Unusable


@dataclass(frozen=True)
class ShortcutStatus:
    """Whether Kestrel holds its shortcut now, and words for the person either way."""

    held: bool
    words: str
    taken: bool = False  # another program holds the keys: the one case the main window says aloud


def held_words(sequence: str) -> ShortcutStatus:
    """The status of a shortcut that works."""
    return ShortcutStatus(True, f"{sequence} opens quick ask from any program.")


def taken_words(sequence: str) -> ShortcutStatus:
    """The status of a shortcut another program holds."""
    return ShortcutStatus(False, f"{sequence} is already used by another program: choose another shortcut in {SETTINGS_PLACE}.",
                          taken=True)


RELEASED = ShortcutStatus(False, "Quick ask's shortcut is off.")
NOT_BOUND = ShortcutStatus(False, "No shortcut is set yet.")
NO_DESKTOP_SHORTCUT = ShortcutStatus(
    False,
    "This desktop gives apps no global shortcut. To open quick ask from anywhere, add a shortcut "
    "that runs \"kestrel ask\" in your desktop's own keyboard settings.",
)


class GlobalShortcut(QObject):
    """One key combination that reaches Kestrel from any program; each platform subclasses it.

    bind() never waits: the status arrives through statusChanged (at once or from a thread of the
    platform's own), and activated() is emitted on the GUI thread.
    """

    activated = Signal()
    statusChanged = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._status = NOT_BOUND

    @property
    def status(self) -> ShortcutStatus:
        """The latest status, as last emitted."""
        return self._status

    def bind(self, sequence: str) -> None:
        """Take the combination in Qt PortableText ("Ctrl+Alt+Space"), releasing any held before."""
        raise NotImplementedError

    def release(self) -> None:
        """Give the combination back; activated() is not emitted after this returns."""
        raise NotImplementedError

    def _set_status(self, status: ShortcutStatus) -> None:
        """Keep and announce a new status."""
        self._status = status
        self.statusChanged.emit(status)


class NoGlobalShortcut(GlobalShortcut):
    """A desktop that offers no global shortcut: the status says how to bind `kestrel ask` instead."""

    def __init__(self, parent: QObject | None = None, status: ShortcutStatus = NO_DESKTOP_SHORTCUT) -> None:
        super().__init__(parent)
        self._reason = status

    def bind(self, sequence: str) -> None:
        """Override GlobalShortcut.bind: say why there is none."""
        self._set_status(self._reason)

    def release(self) -> None:
        """Override GlobalShortcut.release."""
        self._set_status(RELEASED)


class ThreadReports(QObject):
    """Carries a worker thread's news to the GUI thread as queued signals, tagged with its generation
    so that news from a worker already released is dropped."""

    reported = Signal(int, object)
    pressed = Signal(int)

    def __init__(self, owner: QObject, on_status: Callable[[ShortcutStatus], None], on_press: Callable[[], None]) -> None:
        super().__init__(owner)
        self._on_status = on_status
        self._on_press = on_press
        self.generation = 0
        self.reported.connect(self._on_reported, Qt.ConnectionType.QueuedConnection)
        self.pressed.connect(self._on_pressed, Qt.ConnectionType.QueuedConnection)

    def next_generation(self) -> int:
        """Start a new worker's generation, making every earlier worker's news stale."""
        self.generation += 1
        return self.generation

    def _on_reported(self, generation: int, status: object) -> None:
        if generation == self.generation and isinstance(status, ShortcutStatus):
            self._on_status(status)

    def _on_pressed(self, generation: int) -> None:
        if generation == self.generation:
            self._on_press()


class ShortcutWorker(Protocol):
    """A thread that holds a shortcut from start to end (X11's grab, the portal's session)."""

    def start(self) -> None: ...

    def is_alive(self) -> bool: ...

    def join(self, timeout: float | None = None) -> None: ...

    def request_stop(self) -> None: ...


class ThreadedShortcut(GlobalShortcut):
    """A shortcut held by a worker thread of its own, which owns its connection end to end.

    bind() asks the last worker to end without waiting and starts a new one, which waits for the
    last to let go of the keys first; release() asks the worker to end. Subclasses say how to make
    a worker for a sequence, or why the sequence cannot be one (`_make_worker`).
    """

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._reports = ThreadReports(self, self._set_status, self.activated.emit)
        self._worker: ShortcutWorker | None = None

    def bind(self, sequence: str) -> None:
        """Override GlobalShortcut.bind: a new worker, after the last one has let go."""
        previous = self._stop_worker()
        made = self._make_worker(sequence, self._reports.next_generation(), previous)
        if isinstance(made, Unusable):
            self._set_status(ShortcutStatus(False, made.words))
            return
        self._worker = made
        made.start()

    def release(self) -> None:
        """Override GlobalShortcut.release: the worker lets go of the keys, closes its connection and ends."""
        self._stop_worker()
        self._reports.next_generation()
        self._set_status(RELEASED)

    def is_listening(self) -> bool:
        """Whether the worker thread is still running (it ends soon after release())."""
        return self._worker is not None and self._worker.is_alive()

    def _make_worker(self, sequence: str, generation: int,
                     previous: ShortcutWorker | None) -> ShortcutWorker | Unusable:
        raise NotImplementedError

    def _stop_worker(self) -> ShortcutWorker | None:
        worker = self._worker
        if worker is not None:
            worker.request_stop()
        return worker
