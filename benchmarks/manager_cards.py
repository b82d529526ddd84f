"""How the model manager's card list copes with 100 catalog models: building, relisting, searching, scrolling.

    QT_QPA_PLATFORM=offscreen python benchmarks/manager_cards.py [--rows 100]

The cards are widgets in a scroll area (app/ui/models/manager_cards.py says why); this measures
what that costs: the first listing builds every card once, a relisting only moves and
updates the cards that changed, a search hides and shows cards, and a scroll step moves
one finished widget. Timings, never asserted in tests.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100)
    args = parser.parse_args()
    from PySide6.QtWidgets import QApplication

    app = QApplication(sys.argv)
    from app.ui.models.model_manager import ModelManager
    from app.ui.common.theme import apply_theme
    from tests.ui.test_model_items import catalog_row
    from tests.ui.test_model_manager import FakeAdapter

    apply_theme(app, "light")
    adapter = FakeAdapter()
    window = ModelManager(adapter, adapter.library, adapter.settings)
    window.show()
    window.tabs.setCurrentWidget(window.catalog)
    app.processEvents()
    rows = [catalog_row(f"model-{number}") for number in range(args.rows)]

    def timed(work) -> float:
        started = time.perf_counter()
        work()
        app.processEvents()
        return (time.perf_counter() - started) * 1000

    print(f"first listing ({args.rows} cards built): {timed(lambda: adapter.catalog.set_rows(rows)):.0f} ms")
    changed = [dataclasses.replace(row, installed_id="x") if number == 3 else row for number, row in enumerate(rows)]
    print(f"relisting, one row changed: {timed(lambda: adapter.catalog.set_rows(changed)):.0f} ms")
    print(f"relisting in reverse order: {timed(lambda: adapter.catalog.set_rows(changed[::-1])):.0f} ms")
    search = window.catalog.search
    print(f"search that leaves one, then cleared: {timed(lambda: (search.setText('model-42'), search.setText(''))):.0f} ms")
    view = window.catalog.view
    bar = view.verticalScrollBar()
    steps = [timed(lambda value=value: (bar.setValue(value), view.viewport().repaint()))
             for value in range(0, bar.maximum(), max(1, bar.maximum() // 100))]
    print(f"scroll step with repaint: median {statistics.median(steps):.1f} ms, worst {max(steps):.1f} ms "
          f"over {len(steps)} steps; cards built in all: {view.built}")
    window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
