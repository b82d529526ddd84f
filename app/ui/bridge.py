"""StreamBridge: hands a growing answer to the view at most once per frame."""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer, Signal

FRAME_MS = 16


class StreamBridge(QObject):
    """Coalesces token deltas; textGrew carries one frame's new text of one message."""

    textGrew = Signal(int, str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._pending: dict[int, list[str]] = {}
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(FRAME_MS)
        self._timer.timeout.connect(self.flush)
        self.emitted = 0

    def push(self, message_id: int, delta: str) -> None:
        """New text of the message; shown at the next frame, not now."""
        self._pending.setdefault(message_id, []).append(delta)
        if not self._timer.isActive():
            self._timer.start()

    def flush(self) -> None:
        """Send what is pending now (also called when an answer ends)."""
        self._timer.stop()
        pending, self._pending = self._pending, {}
        for message_id, parts in pending.items():
            self.emitted += 1
            self.textGrew.emit(message_id, "".join(parts))
