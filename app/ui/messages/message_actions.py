"""The icon actions under each message: which a message has, where they sit, how they are drawn."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QColor, QPainter, QPalette, QPixmap

from app.core.conversation import Message, MessageState, Role
from app.ui.common import icons
from app.ui.messages.message_layout import ACTION, ICON

# Each action's tooltip names the key that does the same for the current message.
TIPS = {
    "copy": "Copy this message (Ctrl+C)",
    "regenerate": "Write this answer again (Ctrl+R)",
    "edit": "Edit this message and send it again (F2)",
    "remember": "Remember something from this message (Ctrl+Shift+R)",
    "read-aloud": "Read this answer aloud (Ctrl+Shift+A)",
    "stop-reading": "Stop reading (Ctrl+Shift+A, or Esc in the messages)",
}
COPIED_TIP = "Copied"
# What a list offers unless told otherwise: the chat pane's copy, regenerate, edit and remember.
EVERY_ACTION = frozenset(("copy", "regenerate", "edit", "remember"))
# A chat that must leave no trace (a temporary one), or memory turned off, offers no Remember.
WITHOUT_REMEMBER = EVERY_ACTION - {"remember"}


class Offered(frozenset[str]):
    """The actions a list offers (their names, as EVERY_ACTION), with its answers' speaker: `speaker` says
    whether each answer has one (a window that reads aloud), `reading` the answer read aloud now (its
    speaker is a Stop, shown even while that answer is being written)."""

    speaker = False
    reading: int | None = None

    @classmethod
    def of(cls, names: frozenset[str], *, speaker: bool, reading: int | None = None) -> Offered:
        made = cls(names)
        made.speaker, made.reading = speaker, reading
        return made

    def same(self, other: frozenset[str]) -> bool:
        """Whether other offers the same, speaker and reading included (== compares the names alone)."""
        return (self == other and isinstance(other, Offered) and other.speaker == self.speaker
                and other.reading == self.reading)


def offered_with(names: frozenset[str], before: frozenset[str]) -> frozenset[str]:
    """names, with the speaker and the answer read that `before` had (a list's offer changed, not its speaker)."""
    if isinstance(before, Offered):
        return Offered.of(names, speaker=before.speaker, reading=before.reading)
    return names


def actions_for(message: Message, last_answer: bool, offered: frozenset[str] = EVERY_ACTION) -> tuple[str, ...]:
    """The actions a message offers: copy and remember on all, regenerate on the last answer, edit on the
    user's, of those the list `offered` (a list that cannot redo or edit offers copy alone); an answer's
    speaker where `offered` is an Offered with one (the answer read now: its Stop)."""
    speaker = isinstance(offered, Offered) and offered.speaker
    reading = offered.reading if isinstance(offered, Offered) else None
    if message.state == MessageState.STREAMING:
        # Nothing to copy or redo until it is written; an answer read as it streams can be silenced.
        return ("stop-reading",) if speaker and reading == message.id else ()
    if message.role == Role.USER:
        names: tuple[str, ...] = ("copy", "edit", "remember")
    elif message.role == Role.ASSISTANT and last_answer:
        names = ("copy", "read-aloud", "regenerate", "remember")
    else:
        names = ("copy", "read-aloud", "remember")
    said = "stop-reading" if reading == message.id else "read-aloud"
    return tuple(said if name == "read-aloud" else name for name in names
                 if name in offered or name == "read-aloud" and speaker)


def action_rects(row: QRect, names: tuple[str, ...], right_aligned: bool) -> list[tuple[str, QRect]]:
    """Where each action's square is in the actions row (the user's at its right end)."""
    # The icons' own padding lines the first glyph up with the text's edge, near enough.
    left = row.right() + 1 - len(names) * ACTION if right_aligned else row.left() - (ACTION - ICON) // 2
    return [(name, QRect(left + number * ACTION, row.top(), ACTION, ACTION)) for number, name in enumerate(names)]


def action_at(rects: list[tuple[str, QRect]], point: QPoint) -> str | None:
    for name, rect in rects:
        if rect.contains(point):
            return name
    return None


class ActionIcons:
    """Draws action icons from pixmaps made once per (name, colour, device pixel ratio)."""

    def __init__(self) -> None:
        self._pixmaps: dict[tuple[str, int, float], QPixmap] = {}
        # QtAwesome loads its fonts when the first icon is drawn (about 35 ms): let that be
        # at start-up, with the window's other icons, not when the first chat is opened.
        icons.pixmap("copy", ICON, QColor("black"))

    def clear(self) -> None:
        self._pixmaps.clear()

    def ratios(self) -> set[float]:
        return {ratio for _name, _color, ratio in self._pixmaps}

    def _pixmap(self, name: str, color: QColor, ratio: float) -> QPixmap:
        key = (name, color.rgba(), ratio)
        pixmap = self._pixmaps.get(key)
        if pixmap is None:
            pixmap = self._pixmaps[key] = icons.pixmap(name, ICON, color, ratio)
        return pixmap

    def paint(self, painter: QPainter, rects: list[tuple[str, QRect]], palette: QPalette,
              hovered: str | None, done: bool) -> None:
        """Paint the icons; the hovered one on a soft square, copy as a tick just after a copy, the Stop of an
        answer read aloud in the text's colour."""
        # The engine's device is what is painted on (a widget's painting may be redirected
        # into a backing store or an image of another ratio than the widget's screen).
        engine = painter.paintEngine()
        device = engine.paintDevice() if engine is not None and engine.paintDevice() is not None else painter.device()
        ratio = device.devicePixelRatioF() if device is not None else 1.0
        muted = palette.color(QPalette.ColorRole.PlaceholderText)
        strong = palette.color(QPalette.ColorRole.Text)
        for name, rect in rects:
            if name == hovered:
                shade = QColor(strong)
                shade.setAlpha(28)
                painter.setRenderHint(QPainter.RenderHint.Antialiasing)
                painter.setPen(Qt.PenStyle.NoPen)
                painter.setBrush(shade)
                painter.drawRoundedRect(rect.adjusted(1, 1, -1, -1), 6, 6)
            glyph = "done" if name == "copy" and done else name
            # The Stop of the answer being read stands out: it says which answer is heard.
            pixmap = self._pixmap(glyph, strong if name in (hovered, "stop-reading") else muted, ratio)
            offset = (ACTION - ICON) // 2
            painter.drawPixmap(rect.left() + offset, rect.top() + offset, pixmap)
