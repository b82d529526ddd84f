"""One model as a card: its name, publisher and facts, the fit as a coloured badge with its reason, tags, one action."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFocusEvent, QKeyEvent, QMouseEvent, QPalette, QResizeEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from app.ui.state.fit_verdict import VERDICT_COLOURS
from app.ui.models.model_card_facts import CardFacts

# A badge whose fit is not known yet: grey, as it says nothing either way.
UNKNOWN_COLOUR = "#7d838c"


class ElidedLabel(QLabel):
    """One line that ends in "…" when there is no room, with the whole text on hover.

    It asks for no width of its own (a long model name never widens the window); the
    clip test (tests/ui/test_model_cards.py) accepts it because the tooltip holds the text.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""
        self._tip = ""
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

    def set_full_text(self, text: str, tip: str = "") -> None:
        """Show text (elided to fit); tip is added under it on hover."""
        self._full, self._tip = text, tip
        self._elide()

    def full_text(self) -> str:
        return self._full

    def is_elided(self) -> bool:
        return self.text() != self._full

    def resizeEvent(self, event: QResizeEvent) -> None:  # Override QLabel.resizeEvent.
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        shown = self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, max(0, self.width()))
        if shown != self.text():
            self.setText(shown)
        tip = "\n".join(part for part in (self._full if shown != self._full else "", self._tip) if part)
        self.setToolTip(tip)


def wrapped(parent: QWidget, name: str) -> QLabel:
    """A label that wraps rather than asks for width: cards get narrow at the window's minimum size."""
    label = QLabel(parent)
    label.setObjectName(name)
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.PlainText)
    return label


class ModelCard(QFrame):
    """A card for one installed or catalog model; clicking it selects it (`selected` shows).

    Signals: clicked (the card, not its button, was clicked), actionRequested(target)
    (its primary button: download this catalog id, or load this model id).
    """

    clicked = Signal()
    actionRequested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelCard")
        self.setProperty("selected", False)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.facts: CardFacts | None = None
        self.title = ElidedLabel(self)
        self.title.setObjectName("cardTitle")
        self.publisher = ElidedLabel(self)
        self.publisher.setObjectName("cardMuted")
        self.details = wrapped(self, "cardFacts")
        self.badge = QLabel(self)
        self.badge.setObjectName("verdictBadge")
        self.badge.setTextFormat(Qt.TextFormat.RichText)
        self.reason = wrapped(self, "cardMuted")
        self.status = wrapped(self, "cardStatus")
        self.tags = QHBoxLayout()
        self.tags.setSpacing(4)
        self.tag_labels: list[QLabel] = []
        self.action = QPushButton(self)
        self.action.setObjectName("primaryAction")
        self.action.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self._lay_out()
        self.action.clicked.connect(lambda: self.facts and self.actionRequested.emit(self.facts.action_target))

    def _lay_out(self) -> None:
        words = QVBoxLayout()
        words.setSpacing(2)
        for label in (self.title, self.publisher, self.details, self.reason):
            words.addWidget(label)
        ends = QVBoxLayout()
        ends.setSpacing(6)
        ends.addWidget(self.badge, 0, Qt.AlignmentFlag.AlignRight)
        ends.addWidget(self.action, 0, Qt.AlignmentFlag.AlignRight)
        ends.addStretch(1)
        top = QHBoxLayout()
        top.setSpacing(10)
        top.addLayout(words, 1)
        top.addLayout(ends)
        line = QHBoxLayout()
        line.setSpacing(8)
        line.addLayout(self.tags)
        line.addWidget(self.status, 1)
        line.addStretch()  # takes the room while there is no status, so the tags keep their own width
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 10, 12, 10)
        layout.setSpacing(4)
        layout.addLayout(top)
        layout.addLayout(line)

    def show_facts(self, facts: CardFacts) -> None:
        """Show these facts; only what changed is set again (a listing re-sends every row)."""
        if facts == self.facts:
            return
        self.facts = facts
        self.title.set_full_text(facts.title, facts.title_tip)
        self.publisher.set_full_text(facts.publisher)
        self.publisher.setVisible(bool(facts.publisher))
        self.details.setText(" · ".join(facts.facts))
        colour = UNKNOWN_COLOUR if facts.verdict is None else VERDICT_COLOURS[facts.verdict]
        self.badge.setText(f'<span style="color:{colour}">●</span>&nbsp;{facts.verdict_words}')
        self.badge.setToolTip(facts.verdict_tip)
        self.badge.setProperty("colour", colour)
        self.reason.setText(facts.reason)
        self.reason.setToolTip(facts.verdict_tip)
        self.status.setText(facts.status)
        self.status.setVisible(bool(facts.status))
        self._show_tags(facts.tags)
        self.action.setText(facts.action.value)
        self.action.setEnabled(facts.action_enabled)
        self.action.setToolTip(facts.action_tip)
        self.action.setAccessibleName(f"{facts.action.value} {facts.title}")
        self.setAccessibleName(facts.title)

    def _show_tags(self, tags: tuple[str, ...]) -> None:
        if tuple(label.text() for label in self.tag_labels) == tags:
            return
        for label in self.tag_labels:
            label.deleteLater()
        self.tag_labels = []
        for words in tags:
            label = QLabel(words, self)
            label.setObjectName("capabilityTag")
            self.tags.addWidget(label)
            self.tag_labels.append(label)

    def set_selected(self, selected: bool) -> None:
        if self.property("selected") != selected:
            self.setProperty("selected", selected)
            self.style().unpolish(self)
            self.style().polish(self)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # Override QFrame.keyPressEvent.
        """Enter on a chosen card does its action, as a click on its button would."""
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and self.action.isEnabled():
            self.action.click()
            return
        super().keyPressEvent(event)

    def focusInEvent(self, event: QFocusEvent) -> None:  # Override QFrame.focusInEvent.
        super().focusInEvent(event)
        self.clicked.emit()  # reaching a card with Tab chooses it, as a click does

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # Override QFrame.mouseReleaseEvent.
        if event.button() == Qt.MouseButton.LeftButton:
            self.clicked.emit()
        super().mouseReleaseEvent(event)


def card_style_sheet(palette: QPalette) -> str:
    """The cards' look in the palette's colours: set on a card list, which sets it again on a theme change."""
    def c(role: QPalette.ColorRole) -> str:
        return palette.color(role).name()

    R = QPalette.ColorRole
    return f"""
        QFrame#modelCard {{ background: {c(R.Base)}; border: 1px solid {c(R.Mid)}; border-radius: 10px; }}
        QFrame#modelCard[selected="true"] {{ border: 2px solid {c(R.Highlight)}; }}
        QFrame#modelCard:focus {{ border: 2px solid {c(R.Highlight)}; }}
        QLabel#cardTitle {{ font-weight: bold; font-size: 11pt; }}
        QLabel#cardMuted {{ color: {c(R.PlaceholderText)}; }}
        QLabel#verdictBadge {{ background: {c(R.AlternateBase)}; border: 1px solid {c(R.Mid)};
                               border-radius: 9px; padding: 1px 8px; }}
        QLabel#capabilityTag {{ background: {c(R.AlternateBase)}; color: {c(R.Text)}; border-radius: 6px;
                                padding: 1px 6px; }}
        QPushButton#primaryAction {{ background: {c(R.Highlight)}; color: {c(R.HighlightedText)}; border: none;
                                     border-radius: 6px; padding: 5px 16px; font-weight: bold; }}
        QPushButton#primaryAction:disabled {{ background: {c(R.AlternateBase)}; color: {c(R.PlaceholderText)}; }}
        QPushButton#primaryAction:focus {{ outline: none; border: 2px solid {c(R.Text)}; padding: 3px 14px; }}
        QPushButton#secondaryAction {{ background: {c(R.Button)}; color: {c(R.ButtonText)};
                                       border: 1px solid {c(R.Mid)}; border-radius: 6px; padding: 5px 14px; }}
        QPushButton#secondaryAction:disabled {{ color: {c(R.PlaceholderText)}; }}
    """
