"""The hardware window: this computer as a form, its devices as rows, and why the model runs where it does."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QRectF, QSize, Qt, QTimer
from PySide6.QtGui import QColor, QGuiApplication, QPainter, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import (QDialog, QFormLayout, QFrame, QHBoxLayout, QHeaderView, QLabel, QPushButton,
                               QScrollArea, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget)

from app.service.library.hardware_overview import DeviceRow, HardwareOverview, computer_rows, power_text, runtime_rows
from app.ui.common import icons

# The panel's tint: the accent when the model runs where it should, amber when it fell back.
_AMBER = "#d08a00"


class HardwareWindow(QDialog):
    """What the machine has, where the model runs, and why; not modal, the chat goes on.

    Attributes: `placement` (the coloured panel at the top), `devices` (a row per GPU and
    NPU), `copy_button` (puts `overview.text` on the clipboard, for bug reports).
    """

    def __init__(self, overview: HardwareOverview, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.overview = overview
        self.setWindowTitle("Hardware")
        self.setModal(False)
        self.setWindowIcon(icons.icon("hardware"))
        self.placement = PlacementPanel(overview, self)
        self.devices = _device_table(overview, self)
        scroll = QScrollArea(self)
        scroll.setWidget(self._sections(overview))
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.copy_button = QPushButton("&Copy report", self)
        self.copy_button.setToolTip("Copy the whole report as text, for a bug report")
        icons.themed(self.copy_button, "copy")
        self.copy_button.clicked.connect(self.copy_report)
        # The window's own timer: it dies with the window, so it never fires on a closed one.
        self._copied = QTimer(self)
        self._copied.setSingleShot(True)
        self._copied.setInterval(1500)
        self._copied.timeout.connect(self._copied_done)
        close = QPushButton("Close", self)
        close.setDefault(True)
        close.clicked.connect(self.close)
        buttons = QHBoxLayout()
        buttons.addWidget(self.copy_button)
        buttons.addStretch(1)
        buttons.addWidget(close)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 16, 16, 12)
        layout.setSpacing(12)
        layout.addWidget(self.placement)
        layout.addWidget(scroll, 1)
        layout.addLayout(buttons)
        self.resize(760, 680)

    def _sections(self, overview: HardwareOverview) -> QWidget:
        body = QWidget(self)
        sections = QVBoxLayout(body)
        sections.setContentsMargins(4, 4, 12, 4)
        sections.setSpacing(6)
        _section(sections, "This computer", _form(computer_rows(overview.report)))
        _section(sections, "Graphics and NPUs", self.devices)
        _section(sections, "Runtimes", _form(runtime_rows(overview.report)))
        _section(sections, "Power", _form([("Now", power_text(overview.report.power))]))
        if overview.report.errors:
            _section(sections, "What could not be read",
                     _form([(error.source, error.message) for error in overview.report.errors]))
        sections.addStretch(1)
        # One column of names for every section, so their values line up down the window.
        names = body.findChildren(QLabel, "formName")
        width = max((label.sizeHint().width() for label in names), default=0)
        for label in names:
            label.setMinimumWidth(width)
        return body

    def copy_report(self) -> None:
        """The plain report on the clipboard; the button says so for a moment."""
        QGuiApplication.clipboard().setText(self.overview.text)
        self.copy_button.setText("Copied")
        self._copied.start()

    def _copied_done(self) -> None:
        self.copy_button.setText("&Copy report")


class PlacementPanel(QFrame):
    """The model in use, its device and why, tinted: amber when it fell back from a better device."""

    def __init__(self, overview: HardwareOverview, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("placementPanel")
        loaded = overview.loaded
        self.fell_back = bool(overview.fallback_reasons)
        self.loaded = loaded is not None
        self._device = _device_icon(loaded.device if loaded else "")
        self.icon = QLabel(self)
        self.title = _label(self, selectable=False)
        font = self.title.font()
        font.setPointSizeF(font.pointSizeF() * 1.25)
        font.setBold(True)
        self.title.setFont(font)
        self.reason = _label(self)
        self.fallbacks = _label(self)
        self.details = _label(self)
        self._say(overview)
        text = QVBoxLayout()
        text.setSpacing(6)
        for widget in (self.title, self.reason, self.fallbacks, self.details):
            text.addWidget(widget)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(14, 12, 14, 12)
        layout.setSpacing(12)
        layout.addWidget(self.icon, 0, Qt.AlignmentFlag.AlignTop)
        layout.addLayout(text, 1)
        self._recolour()

    def _say(self, overview: HardwareOverview) -> None:
        """The model and its device, why there, what was tried first; "No model loaded" without one."""
        loaded = overview.loaded
        if loaded is None:
            self.title.setText("No model loaded")
            self.reason.setText("Load a model to see which device it runs on and why.")
        else:
            self.title.setText(f"{overview.model_name} runs on {_device_words(loaded.device)}")
            self.reason.setText(f"Why: {overview.placement_reason}" if overview.placement_reason else "")
            if self.fell_back:
                self.fallbacks.setText("Tried first, and could not use:\n"
                                       + "\n".join(f"•  {reason}" for reason in overview.fallback_reasons))
            priority = f"Priority: {overview.priority_problem}" if overview.priority_problem else ""
            self.details.setText("\n".join(line for line in (overview.threads, priority) if line))
        for label in (self.reason, self.fallbacks, self.details):
            label.setVisible(bool(label.text()))

    def tint(self) -> QColor:
        """The colour the panel is drawn in: its border, and its background faintly."""
        if self.fell_back:
            return QColor(_AMBER)
        palette = QGuiApplication.palette()
        return palette.color(QPalette.ColorRole.Highlight if self.loaded else QPalette.ColorRole.PlaceholderText)

    def changeEvent(self, event: QEvent) -> None:
        """Override QWidget.changeEvent: the icon in the new theme's colours."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self._recolour()

    def paintEvent(self, event: QPaintEvent) -> None:
        """Override QWidget.paintEvent: a rounded panel tinted faintly, with a border in the tint."""
        tint = self.tint()
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(tint, 1))
        painter.setBrush(_mix(tint, QGuiApplication.palette().color(QPalette.ColorRole.Base), 0.14))
        painter.drawRoundedRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5), 8, 8)
        painter.end()

    def _recolour(self) -> None:
        name = "model" if not self.loaded else "warning" if self.fell_back and self._device == "cpu" else self._device
        self.icon.setPixmap(icons.pixmap(name, 32, self.tint(), self.devicePixelRatioF()))


def _device_table(overview: HardwareOverview, parent: QWidget) -> QTreeWidget:
    table = QTreeWidget(parent)
    table.setObjectName("hardwareDevices")
    table.setHeaderLabels(["Device", "Memory", "Driver", "Runs here with"])
    table.setRootIsDecorated(False)
    table.setAlternatingRowColors(True)
    table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
    table.setSelectionMode(QTreeWidget.SelectionMode.NoSelection)
    table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    in_use = overview.loaded.device if overview.loaded else ""
    items = [_device_item(row, in_use, overview.fallback_reasons) for row in overview.devices] or [
        QTreeWidgetItem(["No graphics adapter or NPU found", "", "", ""])]
    table.addTopLevelItems(items)
    header = table.header()
    header.setStretchLastSection(False)
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
    # Roomy rows, and a table as tall as its rows: the window scrolls, not the table inside it.
    metrics = table.fontMetrics()
    for item in items:
        lines = max(item.text(column).count("\n") + 1 for column in range(4))
        width = max(metrics.horizontalAdvance(text) for text in item.text(0).split("\n")) + 40
        item.setSizeHint(0, QSize(width, lines * metrics.lineSpacing() + 12))
    rows = sum(item.sizeHint(0).height() for item in items)
    table.setFixedHeight(header.sizeHint().height() + rows + 2 * table.frameWidth())
    return table


def _device_item(row: DeviceRow, in_use: str, fallbacks: tuple[str, ...]) -> QTreeWidgetItem:
    """A device's row: the one the model runs on now in bold, one it could not use marked amber."""
    item = QTreeWidgetItem([f"{row.name}\n{row.description}", row.memory.replace(", ", "\n") or "—",
                            row.driver.replace(" (", "\n(") or "—",
                            "\n".join(row.runs_with) or "nothing installed here"])
    item.setIcon(0, icons.icon(row.kind, icons.ROLE.Text))
    if row.name and row.name in in_use:
        font = item.font(0)
        font.setBold(True)
        for column in range(4):
            item.setFont(column, font)
        item.setToolTip(0, "The model runs on this device now")
    failed = [reason for reason in fallbacks if row.name and reason.startswith(row.name)]
    if failed:
        item.setIcon(0, icons.icon("warning", color=_AMBER))
        item.setToolTip(0, "Could not use it for this model:\n" + "\n".join(failed))
    return item


def _section(layout: QVBoxLayout, title: str, content: QWidget) -> None:
    heading = QLabel(title, content.parentWidget())
    heading.setObjectName("sectionHeading")
    font = heading.font()
    font.setBold(True)
    font.setPointSizeF(font.pointSizeF() * 1.1)
    heading.setFont(font)
    if layout.count():
        layout.addSpacing(10)
    layout.addWidget(heading)
    layout.addWidget(content)


def _form(rows: list[tuple[str, str]]) -> QWidget:
    widget = QWidget()
    form = QFormLayout(widget)
    form.setContentsMargins(0, 0, 0, 0)
    form.setHorizontalSpacing(16)
    form.setVerticalSpacing(6)
    form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft)
    form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
    for name, value in rows:
        name_label = QLabel(name, widget)
        name_label.setObjectName("formName")
        name_label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        form.addRow(name_label, _label(widget, value))
    return widget


def _label(parent: QWidget, text: str = "", *, selectable: bool = True) -> QLabel:
    label = QLabel(text, parent)
    label.setWordWrap(True)
    if selectable:
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def _device_icon(device: str) -> str:
    """Loaded.device reads "CPU", "GPU: name" or "NPU: name" (app/engine/backends/loading.py device_text)."""
    kind = device.split(":", 1)[0].split(" ", 1)[0].lower()
    return kind if kind in ("gpu", "npu") else "cpu"


def _device_words(device: str) -> str:
    kind, _, name = device.partition(": ")
    return f"the {kind}: {name}" if name else f"the {device}"


def _mix(color: QColor, base: QColor, amount: float) -> QColor:
    """color laid over base at amount (0 to 1) opacity."""
    def channel(ours: float, theirs: float) -> float:
        return ours * amount + theirs * (1 - amount)

    return QColor.fromRgbF(channel(color.redF(), base.redF()), channel(color.greenF(), base.greenF()),
                           channel(color.blueF(), base.blueF()))
