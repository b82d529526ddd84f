"""Memory's scenes for the clip probe (tests/helpers/clip_probe.py): Kestrel's proposal row, asking and having kept one."""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout, QWidget

from app.core.memories import Memory, MemoryOrigin
from app.service.memory_events import ProposedMemory

ASKED = "I write Python at work and prefer short answers without long introductions."
KEPT = "My daughter is called Ada."


def proposal_rows(window: Any) -> QWidget:
    """Two rows as the chat pane shows them, in a column as narrow as the chat's beside the sidebar at 200%
    (960×540): a long proposal with another waiting, and the notice of one kept without asking."""
    from app.ui.memory.proposal_row import MemoryProposalRow

    shown = QWidget(window)
    shown.setWindowTitle("Memory proposals")
    asking, kept = MemoryProposalRow(shown), MemoryProposalRow(shown)
    asking.chat_title = lambda conversation_id: "Planning a rainy Saturday with the children in Oslo"
    asking.add(ProposedMemory(1, ASKED, 1))
    asking.add(ProposedMemory(2, "I live in Oslo.", 1))
    kept.add(ProposedMemory(3, KEPT, 1, Memory(7, KEPT, time.time(), MemoryOrigin.PROPOSED, 1)))
    layout = QVBoxLayout(shown)
    layout.addWidget(asking)
    layout.addWidget(kept)
    layout.addStretch(1)
    shown.setWindowFlag(Qt.WindowType.Window)
    shown.resize(620, shown.sizeHint().height())
    return shown
