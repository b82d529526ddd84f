"""The model manager's lists as Qt item models (installed, catalog), kept in step by diffing, and their filter."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import IntEnum
from typing import Any

from PySide6.QtCore import (QAbstractTableModel, QModelIndex, QObject, QPersistentModelIndex, QSortFilterProxyModel,
                            Qt, Signal)
from PySide6.QtGui import QBrush, QGuiApplication, QPalette

from app.core.units import human_size
from app.hardware.fit import Verdict
from app.library.model_files.model_purpose import ModelPurpose
from app.ui.state.fit_verdict import (EMBEDDING_REASON, EMBEDDING_WORDS, verdict_icon, verdict_of, verdict_rank,
                                      verdict_tooltip, verdict_words)

_Index = QModelIndex | QPersistentModelIndex
_Display = Qt.ItemDataRole.DisplayRole


class Roles(IntEnum):
    """Item data roles the three models answer for every column of a row.

    ID: the model id, catalog id or download id. ROW: the whole row (a ModelRow,
    CatalogRow or DownloadItem). VERDICT: the fit's Verdict, which Qt hands back as its str
    value (None when not known).
    SEARCH: the text a search matches. SORT: the column's value for sorting (bytes for
    sizes). MISSING (installed): the file is not there now. STATE (downloads): the
    download's state. FRACTION (downloads): done / total, or -1.0 while one of unknown size moves.
    """

    ID = Qt.ItemDataRole.UserRole + 1
    ROW = Qt.ItemDataRole.UserRole + 2
    VERDICT = Qt.ItemDataRole.UserRole + 3
    SEARCH = Qt.ItemDataRole.UserRole + 4
    SORT = Qt.ItemDataRole.UserRole + 5
    MISSING = Qt.ItemDataRole.UserRole + 6
    STATE = Qt.ItemDataRole.UserRole + 7
    FRACTION = Qt.ItemDataRole.UserRole + 8


# Roles whose value differs by column; the other Roles are the same for the whole row.
_SHOWN_ROLES = (_Display, Qt.ItemDataRole.ToolTipRole, Qt.ItemDataRole.ForegroundRole,
                Qt.ItemDataRole.DecorationRole, Qt.ItemDataRole.FontRole, Roles.SORT)
ROW_ROLES = tuple(role for role in Roles if role != Roles.SORT)


class RowTableModel(QAbstractTableModel):
    """Rows of frozen values, one per key; subclasses say the key and each cell.

    cell() returns plain comparable values (a Verdict for the decoration, "disabled"
    for a greyed foreground, "bold" for the font), so set_rows() and put() can tell which
    roles of which columns really changed and emit dataChanged with only those.
    """

    COLUMNS: tuple[str, ...] = ()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._rows: list[Any] = []

    def key(self, row: Any) -> object:
        raise NotImplementedError

    def cell(self, row: Any, column: int, role: int) -> Any:
        """The plain value of one cell for a shown role, or of the row for a Roles role."""
        raise NotImplementedError

    def rows(self) -> list[Any]:
        return list(self._rows)

    def row_of(self, key: object) -> int | None:
        return next((number for number, row in enumerate(self._rows) if self.key(row) == key), None)

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # Override QAbstractTableModel.
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # Override QAbstractTableModel.
        return 0 if parent.isValid() else len(self.COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = _Display) -> str | None:  # Override.
        if orientation == Qt.Orientation.Horizontal and role == _Display and 0 <= section < len(self.COLUMNS):
            return self.COLUMNS[section]
        return None

    def data(self, index: _Index, role: int = _Display) -> object:  # Override QAbstractTableModel.data.
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        if role not in _SHOWN_ROLES and role not in ROW_ROLES:
            return None
        return _qt_value(role, self.cell(self._rows[index.row()], index.column(), role))

    def set_rows(self, rows: Iterable[Any]) -> None:
        """Show these rows in this order: rows gone are removed, new ones inserted, moved
        ones moved, and a kept row announces only the roles that changed."""
        fresh = list(rows)
        wanted = {self.key(row) for row in fresh}
        for number in reversed(range(len(self._rows))):
            if self.key(self._rows[number]) not in wanted:
                self.beginRemoveRows(QModelIndex(), number, number)
                del self._rows[number]
                self.endRemoveRows()
        for number, row in enumerate(fresh):
            found = next((n for n in range(number, len(self._rows)) if self.key(self._rows[n]) == self.key(row)), None)
            if found is None:
                self.beginInsertRows(QModelIndex(), number, number)
                self._rows.insert(number, row)
                self.endInsertRows()
                continue
            if found != number:
                self.beginMoveRows(QModelIndex(), found, found, QModelIndex(), number)
                self._rows.insert(number, self._rows.pop(found))
                self.endMoveRows()
            self._replace(number, row)

    def put(self, row: Any) -> None:
        """One row changed (or is new: it goes at the end)."""
        number = self.row_of(self.key(row))
        if number is None:
            self.beginInsertRows(QModelIndex(), len(self._rows), len(self._rows))
            self._rows.append(row)
            self.endInsertRows()
        else:
            self._replace(number, row)

    def _replace(self, number: int, row: Any) -> None:
        old = self._rows[number]
        if old == row:
            return
        roles: set[int] = set()
        columns: set[int] = set()
        for column in range(len(self.COLUMNS)):
            for role in _SHOWN_ROLES:
                if self.cell(old, column, role) != self.cell(row, column, role):
                    roles.add(role)
                    columns.add(column)
        for role in ROW_ROLES:
            if self.cell(old, 0, role) != self.cell(row, 0, role):
                roles.add(role)
                columns.update((0, len(self.COLUMNS) - 1))
        self._rows[number] = row
        if roles:
            self.dataChanged.emit(self.index(number, min(columns)), self.index(number, max(columns)),
                                  sorted(int(role) for role in roles))


class InstalledModelsModel(RowTableModel):
    """The library's models (app.service.library.library_service.ModelRow), one row each.

    disk_total: bytes in Kestrel's models folder, as the last LibraryListed said.
    Signals: totalsChanged (disk_total or the referenced total moved).
    """

    COLUMNS = ("Model", "Format", "Parameters", "Quantization", "On disk", "Fits here", "Status")
    MODEL, FORMAT, PARAMETERS, QUANTIZATION, SIZE, FITS, STATUS = range(7)
    totalsChanged = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.disk_total = 0

    def key(self, row: Any) -> object:
        return row.model.id

    def set_listing(self, rows: Sequence[Any], disk_total: int) -> None:
        self.set_rows(rows)
        self.disk_total = disk_total
        self.totalsChanged.emit()

    def referenced_total(self) -> int:
        """Bytes of the models kept where the user keeps them (not in Kestrel's folder)."""
        return sum(row.model.size for row in self._rows if row.model.referenced and not row.model.missing)

    def cell(self, row: Any, column: int, role: int) -> Any:
        model = row.model
        if role == Roles.SORT:
            return self._sort(row, column)
        if role in ROW_ROLES:
            return {Roles.ID: model.id, Roles.ROW: row, Roles.VERDICT: _chat_verdict(row.fit, model.purpose),
                    Roles.MISSING: model.missing,
                    Roles.SEARCH: " ".join(map(str, (model.title, model.id, *row.details.values()))).lower(),
                    }.get(Roles(role))
        if role == Qt.ItemDataRole.ForegroundRole:
            return "disabled" if model.missing else None
        if role == Qt.ItemDataRole.FontRole:
            return "bold" if column == self.MODEL and row.is_default else None
        if column == self.FITS and role == Qt.ItemDataRole.DecorationRole:
            return _chat_verdict(row.fit, model.purpose)
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(row, column)
        return self._text(row, column) if role == _Display else None

    def _text(self, row: Any, column: int) -> str:
        details = row.details
        if column == self.MODEL:
            return row.model.title
        if column == self.FORMAT:
            return str(details.get("format") or row.model.format).upper()
        if column == self.PARAMETERS:
            return parameters_text(details)
        if column == self.QUANTIZATION:
            return details.get("quantization") or "—"
        if column == self.SIZE:
            return human_size(row.model.size)
        if column == self.FITS:
            return "—" if row.model.missing else _chat_words(row.fit, row.model.purpose)
        return status_text(row)

    def _tooltip(self, row: Any, column: int) -> str | None:
        if column == self.FITS:
            if row.model.missing:
                return "The file is not there now."
            return EMBEDDING_REASON if row.model.purpose is not ModelPurpose.CHAT else verdict_tooltip(row.fit)
        if column == self.SIZE:
            return (f"Kept where you keep it: {row.model.path}" if row.model.referenced
                    else "In Kestrel's models folder")
        if column == self.STATUS and row.problem:
            return row.problem
        return str(row.model.path) if column == self.MODEL else None

    def _sort(self, row: Any, column: int) -> Any:
        if column == self.SIZE:
            return row.model.size
        if column == self.PARAMETERS:
            return row.details.get("parameters") or 0
        if column == self.FITS:
            return _rank(row.fit, row.model.purpose)
        return self._text(row, column).lower()


class CatalogModel(RowTableModel):
    """The catalog's models (app.service.library.library_service.CatalogRow), one row each."""

    COLUMNS = ("Model", "Publisher", "Parameters", "Quantization", "Size", "Licence", "Context",
               "Fits this machine")
    MODEL, PUBLISHER, PARAMETERS, QUANTIZATION, SIZE, LICENCE, CONTEXT, FITS = range(8)

    def key(self, row: Any) -> object:
        return row.entry.id

    def cell(self, row: Any, column: int, role: int) -> Any:
        entry = row.entry
        if role == Roles.SORT:
            if column == self.FITS:
                return _rank(row.fit, entry.purpose)
            return entry.size or 0 if column == self.SIZE else self._text(row, column).lower()
        if role in ROW_ROLES:
            return {Roles.ID: entry.id, Roles.ROW: row, Roles.VERDICT: _chat_verdict(row.fit, entry.purpose),
                    Roles.SEARCH: " ".join((entry.name, entry.publisher, entry.parameters, entry.quantization,
                                            entry.license, entry.description)).lower()}.get(Roles(role))
        if column == self.FITS and role == Qt.ItemDataRole.DecorationRole:
            return _chat_verdict(row.fit, entry.purpose)
        if role == Qt.ItemDataRole.ToolTipRole:
            if column == self.FITS:
                return EMBEDDING_REASON if entry.purpose is not ModelPurpose.CHAT else verdict_tooltip(row.fit)
            return entry.description if column == self.MODEL else None
        return self._text(row, column) if role == _Display else None

    def _text(self, row: Any, column: int) -> str:
        entry = row.entry
        if column == self.MODEL:
            return entry.name + (" (installed)" if row.installed_id else "")
        if column == self.SIZE:
            return human_size(entry.size) if entry.size else "size from the server"
        if column == self.CONTEXT:
            return f"{entry.context_length:,} tokens"
        if column == self.FITS:
            return _chat_words(row.fit, entry.purpose)
        return {self.PUBLISHER: entry.publisher, self.PARAMETERS: entry.parameters,
                self.QUANTIZATION: entry.quantization, self.LICENCE: entry.license}[column]


class ModelFilter(QSortFilterProxyModel):
    """Rows whose search text holds every word typed, optionally only those that fit, less any hidden.

    A row whose fit is not known yet is kept by "fits only": it is not known not to fit.
    A hidden key (hide_key: a cancelled download the view cleared) stays hidden.
    """

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._words: tuple[str, ...] = ()
        self._fits_only = False
        self._runs_well_only = False
        self._hidden: set[str] = set()
        self.setSortRole(Roles.SORT)

    def hide_key(self, key: str) -> None:
        self.beginFilterChange()
        self._hidden.add(key)
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def set_text(self, text: str) -> None:
        self.beginFilterChange()
        self._words = tuple(text.lower().split())
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def set_fits_only(self, fits_only: bool) -> None:
        self.beginFilterChange()
        self._fits_only = fits_only
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def set_runs_well_only(self, runs_well_only: bool) -> None:
        """Keep only the models that run at a comfortable speed here (and those not known yet)."""
        self.beginFilterChange()
        self._runs_well_only = runs_well_only
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def filterAcceptsRow(self, row: int, parent: _Index) -> bool:  # Override QSortFilterProxyModel.
        index = self.sourceModel().index(row, 0, parent)
        verdict = index.data(Roles.VERDICT)
        if self._fits_only and verdict == Verdict.WONT_FIT:
            return False
        if self._runs_well_only and verdict is not None and verdict != Verdict.RUNS_WELL:
            return False
        if self._hidden and str(index.data(Roles.ID)) in self._hidden:
            return False
        searched = index.data(Roles.SEARCH) or ""
        return all(word in searched for word in self._words)


def _chat_verdict(fit: Any, purpose: ModelPurpose) -> Verdict | None:
    """A chat model's verdict; an embedding model has none (it answers no chat)."""
    return verdict_of(fit) if purpose is ModelPurpose.CHAT else None


def _chat_words(fit: Any, purpose: ModelPurpose) -> str:
    return verdict_words(fit) if purpose is ModelPurpose.CHAT else EMBEDDING_WORDS


def _rank(fit: Any, purpose: ModelPurpose) -> float:
    """The fit column's sort key, best first: verdict, then speed; embedding models and unknown last."""
    if purpose is not ModelPurpose.CHAT:
        return 1e9
    order, faster = verdict_rank(fit)
    return order * 1e6 + faster


def parameters_text(details: Any) -> str:
    """"1.5B" from the file's size label, or from its counted weights."""
    if details.get("parameters_label"):
        return str(details["parameters_label"])
    count = details.get("parameters")
    if not count:
        return "—"
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if count >= scale:
            return f"{count / scale:.3g}{unit}"
    return str(count)


def status_text(row: Any) -> str:
    """Default, loaded, where it is kept, and what is wrong with it, in words."""
    model = row.model
    words = []
    if row.is_default:
        words.append("Default")
    if row.is_loaded:
        words.append("Loaded")
    if model.missing:
        words.append("Missing — reconnect the drive")
    elif row.problem:
        words.append("Cannot be read")
    elif model.referenced:
        words.append("Where you keep it")
    return " · ".join(words)


def _qt_value(role: int, value: Any) -> Any:
    """A plain cell value as what Qt wants for the role."""
    if value is None:
        return None
    if role == Qt.ItemDataRole.DecorationRole:
        return verdict_icon(value)
    if role == Qt.ItemDataRole.ForegroundRole:
        return QBrush(QGuiApplication.palette().color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text))
    if role == Qt.ItemDataRole.FontRole:
        font = QGuiApplication.font()
        font.setBold(True)
        return font
    return value
