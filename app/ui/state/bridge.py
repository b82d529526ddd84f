"""StreamBridge and FramePacer: how often a growing answer reaches the view, and is drawn."""

from __future__ import annotations

import math

from PySide6.QtCore import QObject, QTimer, Signal

FRAME_MS = 16
# A growing answer is drawn at most once a frame at 60 Hz, and at least 10 times a second
# however dear drawing it gets.
FASTEST_FRAME_MS = FRAME_MS
SLOWEST_FRAME_MS = 100
# The share of the UI thread's time that drawing a growing answer may take. On a small
# machine the engine needs every core: what the window draws, the model does not write.
DRAW_SHARE = 0.05


class StreamBridge(QObject):
    """Coalesces token deltas; textGrew carries one frame's new text of one message
    (message id, text, whether it is the thinking before the answer)."""

    textGrew = Signal(int, str, bool)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._pending: dict[tuple[int, bool], list[str]] = {}
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(FRAME_MS)
        self._timer.timeout.connect(self.flush)
        self.emitted = 0

    def push(self, message_id: int, delta: str, thinking: bool = False) -> None:
        """New text of the message (or of its thinking); shown at the next frame, not now."""
        self._pending.setdefault((message_id, thinking), []).append(delta)
        if not self._timer.isActive():
            self._timer.start()

    def flush(self) -> None:
        """Send what is pending now (also called when an answer ends)."""
        self._timer.stop()
        pending, self._pending = self._pending, {}
        for (message_id, thinking), parts in pending.items():
            self.emitted += 1
            self.textGrew.emit(message_id, "".join(parts), thinking)


class FramePacer:
    """When to draw a growing answer next, from what drawing it cost the last time.

    Drawing takes at most about `share` of the time: a frame that cost 3 ms is followed by
    the next 30 ms later (at share 0.1), never sooner than fastest_ms nor later than
    slowest_ms. Only arithmetic on the times it is given (milliseconds on any one clock),
    so that tests drive it without one.
    """

    def __init__(self, share: float = DRAW_SHARE, fastest_ms: float = FASTEST_FRAME_MS,
                 slowest_ms: float = SLOWEST_FRAME_MS) -> None:
        self.share = share
        self.fastest_ms = fastest_ms
        self.slowest_ms = slowest_ms
        self.cost_ms = 0.0
        self.drawn_at_ms: float | None = None

    def interval_ms(self) -> float:
        """The time between the starts of two frames."""
        return min(self.slowest_ms, max(self.fastest_ms, self.cost_ms / self.share))

    def delay_ms(self, now_ms: float) -> int:
        """How long from now until the next frame: 0 if the last was long enough ago."""
        if self.drawn_at_ms is None:
            return 0
        return max(0, math.ceil(self.drawn_at_ms + self.interval_ms() - now_ms))

    def drawing(self, now_ms: float, cost_ms: float) -> None:
        """A frame started at now_ms; what it cost so far (its layout)."""
        self.drawn_at_ms, self.cost_ms = now_ms, cost_ms

    def add_cost(self, cost_ms: float) -> None:
        """More the same frame cost (its painting, the list's layout when the answer grew taller)."""
        self.cost_ms += cost_ms
