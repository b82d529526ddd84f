"""A scrolling list of cards kept in step with a filtered item model: one card per row, in the model's order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QEvent, QModelIndex, QPersistentModelIndex, QSortFilterProxyModel, Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QApplication, QFrame, QLabel, QScrollArea, QVBoxLayout, QWidget

from app.ui.models.model_card import card_style_sheet
from app.ui.state.model_items import Roles

_Index = QModelIndex | QPersistentModelIndex


class CardList(QScrollArea):
    """Cards for the rows of `proxy` (a filter over one of app/ui/model_items' models), by Roles.ID.

    Widgets in a scroll area, not a QListView with a painting delegate: a card is a few
    labels and a real button, so Tab reaches every action, screen readers read them and
    the clip test measures them. It stays smooth because cards are made once per model and
    kept while it is listed: a search hides and shows cards, a relisting moves and updates
    only what changed, a progress tick sets one card's labels, and scrolling moves finished
    widgets. benchmarks/manager_cards.py on 100 catalog models (2 shared cores, offscreen):
    the first listing 0.45-0.75 s (building the cards once, mostly polishing their style
    sheet), a relisting with one change 35-65 ms, a search 60-110 ms, a scroll step 2-6 ms
    (median). The catalog holds tens of models and a library rarely a hundred.

    fill(card, row) shows a row (a ModelRow, CatalogRow or DownloadItem) on its card.
    Signals: currentChanged(key) (the selected card's key; "" when none is).
    """

    currentChanged = Signal(str)

    def __init__(self, proxy: QSortFilterProxyModel, make_card: Callable[[QWidget], QWidget],
                 fill: Callable[[Any, Any], None], empty_text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._proxy = proxy
        self._make_card = make_card
        self._fill = fill
        self._cards: dict[str, QWidget] = {}
        self._order: list[str] = []
        self.built = 0  # cards made so far: a listing again must not make them anew
        self.current_key = ""
        self._stale = False     # a move or reset is waiting for sync() at the next turn of the event loop
        self._fill_all = False  # a row changed while stale: sync() shows every card's row again
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.inner = QWidget(self)
        self.inner.setObjectName("cardList")
        self._layout = QVBoxLayout(self.inner)
        self._layout.setContentsMargins(2, 2, 2, 2)
        self._layout.setSpacing(8)
        self.empty = QLabel(empty_text, self.inner)
        self.empty.setObjectName("cardMuted")
        self.empty.setWordWrap(True)
        self._layout.addWidget(self.empty)
        self._layout.addStretch(1)
        self.setWidget(self.inner)
        self._sheet = ""
        self._restyle()
        proxy.rowsInserted.connect(self._inserted)
        proxy.rowsRemoved.connect(self._removed)
        for signal in (proxy.rowsMoved, proxy.layoutChanged, proxy.modelReset):
            signal.connect(lambda *_: self._later())
        proxy.dataChanged.connect(self._changed)
        self.sync()

    def model(self) -> QSortFilterProxyModel:
        """The filtered rows the cards show, in their order."""
        return self._proxy

    def keys(self) -> list[str]:
        self.flush()
        return list(self._order)

    def card(self, key: str) -> Any:
        """The card shown for this key; KeyError when none is (filtered out or not listed)."""
        self.flush()
        if key not in self._order:
            raise KeyError(key)
        return self._cards[key]

    def cards(self) -> list[Any]:
        self.flush()
        return [self._cards[key] for key in self._order]

    def current_row(self) -> Any:
        """The selected card's row (a ModelRow, CatalogRow or DownloadItem), or None."""
        self.flush()
        if self.current_key not in self._order:
            return None
        return self._proxy.index(self._order.index(self.current_key), 0).data(Roles.ROW)

    def select(self, position: int) -> None:
        """Select the card at this position (in the shown order)."""
        self.flush()
        self.select_key(self._order[position])

    def select_key(self, key: str) -> None:
        if key == self.current_key:
            return
        for shown, card in self._cards.items():
            setter = getattr(card, "set_selected", None)
            if setter is not None:
                setter(shown == key)
        self.current_key = key
        if key:
            self.ensureWidgetVisible(self._cards[key])
        self.currentChanged.emit(key)

    def _later(self) -> None:
        """Sync once, at the next turn of the event loop: a listing that moves many rows announces
        each move (and the filter a layout change for each), and syncing after every one made
        100 rows take a second."""
        if not self._stale:
            self._stale = True
            QTimer.singleShot(0, self, self.flush)

    def flush(self) -> None:
        """Bring the cards in step with the rows now, if a sync is waiting."""
        if self._stale:
            self._stale = False
            self.sync()

    def sync(self) -> None:
        """Show exactly the proxy's rows in its order (after a move, a sort or a reset).

        Only cards out of place are moved in the layout: a listing that moves one model
        announces one move per row, and moving every card each time made 100 rows take a second.
        """
        wanted = [self._key(self._proxy.index(row, 0)) for row in range(self._proxy.rowCount())]
        for key in [key for key in self._order if key not in wanted]:
            self._drop(key)
        placed = list(self._order)
        for position, key in enumerate(wanted):
            card = self._card_for(key)
            if key not in self._order or self._fill_all:  # a shown card hears of changes by dataChanged
                self._fill(card, self._proxy.index(position, 0).data(Roles.ROW))
            if position < len(placed) and placed[position] == key:
                continue
            if key in placed:
                placed.remove(key)
            placed.insert(position, key)
            self._layout.removeWidget(card)
            self._layout.insertWidget(position, card)
            card.show()
        self._order = wanted
        self._stale = self._fill_all = False
        self._after_change()

    def _inserted(self, _parent: _Index, first: int, last: int) -> None:
        if self._stale:
            return  # the waiting sync shows it
        for position in range(first, last + 1):
            index = self._proxy.index(position, 0)
            key = self._key(index)
            card = self._card_for(key)
            self._fill(card, index.data(Roles.ROW))
            self._order.insert(position, key)
            self._layout.insertWidget(position, card)
            card.show()
        self._after_change()

    def _removed(self, _parent: _Index, first: int, last: int) -> None:
        if self._stale:
            return
        for position in reversed(range(first, last + 1)):
            self._drop(self._order[position])
        self._after_change()

    def _changed(self, top_left: QModelIndex, bottom_right: QModelIndex, _roles: Any = None) -> None:
        if self._stale:
            self._fill_all = True
            return
        for position in range(top_left.row(), bottom_right.row() + 1):
            index = self._proxy.index(position, 0)
            card = self._cards.get(self._key(index))
            if card is None:  # a change announced before its row: show the rows as they are
                self.sync()
                return
            self._fill(card, index.data(Roles.ROW))

    def refill(self) -> None:
        """Show every card's row again (what a card shows may depend on another list: the loaded model)."""
        self.flush()
        for position, key in enumerate(self._order):
            self._fill(self._cards[key], self._proxy.index(position, 0).data(Roles.ROW))

    def _card_for(self, key: str) -> Any:
        card = self._cards.get(key)
        if card is None:
            card = self._make_card(self.inner)
            self.built += 1
            clicked = getattr(card, "clicked", None)
            if clicked is not None:
                clicked.connect(lambda key=key: self.select_key(key))
            self._cards[key] = card
        return card

    def _drop(self, key: str) -> None:
        """Take a card out of the list; it is kept while its model is listed (a search may bring it back)."""
        if key in self._order:
            self._order.remove(key)
        card = self._cards[key]
        self._layout.removeWidget(card)
        card.hide()
        source = self._proxy.sourceModel()
        if getattr(source, "row_of", lambda _key: None)(key) is None:
            del self._cards[key]
            card.deleteLater()

    def _after_change(self) -> None:
        self.empty.setVisible(not self._order)
        # The widest card's least width, so the list never cuts a card (it has no sideways scroll bar).
        least = self.inner.minimumSizeHint().width() + self.verticalScrollBar().sizeHint().width()
        self.setMinimumWidth(max(least, 280))
        if self.current_key and self.current_key not in self._order:
            self.select_key("")

    @staticmethod
    def _key(index: QModelIndex) -> str:
        return str(index.data(Roles.ID))

    def keyPressEvent(self, event: QKeyEvent) -> None:  # Override QScrollArea.keyPressEvent.
        step = {Qt.Key.Key_Up: -1, Qt.Key.Key_Down: 1}.get(Qt.Key(event.key()))
        if step is None or not self._order:
            super().keyPressEvent(event)
            return
        now = self._order.index(self.current_key) if self.current_key in self._order else -step
        position = max(0, min(len(self._order) - 1, now + step))
        self.select(position)
        self._cards[self._order[position]].setFocus(Qt.FocusReason.OtherFocusReason)

    def changeEvent(self, event: QEvent) -> None:  # Override QScrollArea.changeEvent.
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self._restyle()

    def _restyle(self) -> None:
        """The cards' style sheet, on this list only: in the theme's colours, set again when it changes."""
        sheet = card_style_sheet(QApplication.palette())
        if sheet != self._sheet:
            self._sheet = sheet
            self.inner.setStyleSheet(sheet)
