"""How late the window's thread runs while the DocumentsService indexes a folder, and what a rescan costs.

    QT_QPA_PLATFORM=offscreen python benchmarks/indexing_stall.py [--files 2000] [--rescan-files 10000]
                                                                  [--json OUT]

The UI thread: a Qt application (offscreen unless a display is set) on the qasync loop the
window uses, with a 5 ms precise QTimer; its lateness is how much later than asked each tick
came (p50, p99, max). Measured first with nothing else running (the floor of this machine),
then while the DocumentsService, on the same loop as in the window, indexes `--files` generated
documents (text, Markdown, HTML, 1-8 KB) through the reader's real child process: files/s too.
Goal (issue 25): p99 <= 16 ms, one frame at 60 Hz.
Then the rescan: an up-to-date collection of `--rescan-files` small files is scanned again
(sizes and modification times compared, nothing read), timed alone and through the service.
Prints a table, writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(BENCHMARKS.parent))

TICK_MS = 5
WORDS = ("kestrel falcon wing feather moor hover prey vole field wind ridge nest clutch egg hunt dive "
         "sky morning dusk hedge meadow grass river stone wall barn owl heron flight talon beak wind "
         "survey count pair season migration winter summer spring autumn colour chestnut grey tail").split()


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] if ordered else 0.0


def make_folder(folder: Path, files: int, seed: int = 25) -> int:
    """`files` documents of 1-8 KB: 70% text, 20% Markdown with headings, 10% HTML. Their bytes."""
    rng = random.Random(seed)
    total = 0
    for number in range(files):
        sub = folder / f"part{number // 200:02}"
        sub.mkdir(parents=True, exist_ok=True)
        paragraphs = ["\n".join(" ".join(rng.choices(WORDS, k=12)) for _ in range(rng.randint(2, 8)))
                      for _ in range(rng.randint(2, 8))]
        kind = number % 10
        if kind < 7:
            path, text = sub / f"note{number:05}.txt", "\n\n".join(paragraphs)
        elif kind < 9:
            path = sub / f"page{number:05}.md"
            text = "\n\n".join(f"## Section {i}\n\n{p}" for i, p in enumerate(paragraphs))
        else:
            path = sub / f"page{number:05}.html"
            text = "<html><body>" + "".join(f"<h2>Part {i}</h2><p>{p}</p>" for i, p in enumerate(paragraphs)) + \
                "</body></html>"
        path.write_text(text, encoding="utf-8")
        total += len(text)
    return total


class Ticks:
    """A precise Qt timer's lateness on the UI thread, in milliseconds."""

    def __init__(self) -> None:
        from PySide6.QtCore import QTimer, Qt

        self.lateness: list[float] = []
        self._last = 0.0
        self._timer = QTimer()
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(TICK_MS)
        self._timer.timeout.connect(self._tick)

    def start(self) -> None:
        self.lateness.clear()
        self._last = time.perf_counter()
        self._timer.start()

    def stop(self) -> list[float]:
        self._timer.stop()
        return list(self.lateness)

    def _tick(self) -> None:
        now = time.perf_counter()
        self.lateness.append(max(0.0, (now - self._last) * 1000 - TICK_MS))
        self._last = now


def summary(lateness: list[float]) -> dict[str, float]:
    return {"ticks": len(lateness), "p50_ms": round(percentile(lateness, 0.5), 2),
            "p99_ms": round(percentile(lateness, 0.99), 2), "max_ms": round(max(lateness, default=0.0), 2)}


async def measure(files: int, work: Path) -> dict[str, Any]:
    from app.service.documents_events import CollectionsChanged, IndexState
    from app.service.documents.documents_service import DocumentsService

    folder = work / "docs"
    size = make_folder(folder, files)
    ticks = Ticks()
    ticks.start()
    await asyncio.sleep(3.0)
    floor = ticks.stop()

    done = asyncio.Event()
    seen: list[Any] = []

    def heard(event: Any) -> None:
        seen.append(event)
        if isinstance(event, CollectionsChanged) and event.collections and all(
                c.state is IndexState.IDLE and c.files == files and c.indexed + c.unreadable == files
                for c in event.collections):
            done.set()

    service = DocumentsService(heard, database=work / "documents.sqlite3")
    await service.start()
    ticks.start()
    started = time.perf_counter()
    await service.add_folder(folder)
    await asyncio.wait_for(done.wait(), timeout=3600)
    seconds = time.perf_counter() - started
    during = ticks.stop()
    info = service.collections()[0]
    await service.close()
    return {"files": files, "bytes": size, "chunks": info.chunks, "unreadable": info.unreadable,
            "seconds": round(seconds, 2), "files_per_s": round(files / seconds, 1), "events": len(seen),
            "idle": summary(floor), "indexing": summary(during)}


async def measure_rescan(files: int, work: Path) -> dict[str, Any]:
    """An up-to-date collection scanned again: alone (DocumentIndex.index) and through the service."""
    from app.documents.chunks import chunk_document
    from app.documents.index import DocumentIndex
    from app.service.documents_events import CollectionsChanged, IndexState
    from app.service.documents.documents_service import DocumentsService
    from tests.documents.index_fakes import read_here

    folder = work / "many"
    for number in range(files):
        sub = folder / f"g{number // 100:03}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"n{number:05}.txt").write_text(f"note {number} about birds\n", encoding="utf-8")
    database = work / "rescan.sqlite3"
    with DocumentIndex(database, read_here, chunk_document) as index:  # filled fast, in this process
        index.add_collection(folder, "many")
        index.index("many")
        started = time.perf_counter()
        outcome = index.index("many")
        alone = time.perf_counter() - started
        assert outcome.indexed == 0, outcome

    idle = asyncio.Event()

    def heard(event: Any) -> None:
        if isinstance(event, CollectionsChanged) and event.collections[0].state is IndexState.IDLE:
            idle.set()

    service = DocumentsService(heard, database=database, read=read_here)
    await service.start()
    await asyncio.wait_for(idle.wait(), timeout=600)
    ticks = Ticks()
    idle.clear()
    ticks.start()
    started = time.perf_counter()
    service.rescan()
    await asyncio.sleep(0.05)  # the rescan has begun: the state left IDLE and comes back to it
    await asyncio.wait_for(idle.wait(), timeout=600)
    through = time.perf_counter() - started
    during = ticks.stop()
    await service.close()
    return {"files": files, "scan_and_compare_s": round(alone, 3), "service_rescan_s": round(through, 3),
            "ui_during_rescan": summary(during)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--rescan-files", type=int, default=10_000)
    parser.add_argument("--switch-ms", type=float, default=None,
                        help="the interpreter's thread switch interval to try (default: Python's 5 ms)")
    parser.add_argument("--heap", type=int, default=0,
                        help="Python objects kept alive on the UI thread, as a window's widgets and chats keep "
                             "(a full garbage collection, which any thread's allocations trigger, walks them all)")
    parser.add_argument("--freeze", action="store_true",
                        help="gc.freeze() once the heap is built: collections leave those objects out")
    parser.add_argument("--json", type=Path, default=BENCHMARKS / "results" / "indexing_stall.json")
    args = parser.parse_args()
    if args.switch_ms is not None:
        sys.setswitchinterval(args.switch_ms / 1000)
    heap = [{"id": number, "text": str(number)} for number in range(args.heap)]
    if args.freeze:
        gc.freeze()

    import qasync
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    with tempfile.TemporaryDirectory(prefix="kestrel-stall-") as temp:
        os.environ["KESTREL_HOME"] = str(Path(temp) / "home")
        with loop:
            result = loop.run_until_complete(measure(args.files, Path(temp)))
            if args.rescan_files:
                result["rescan"] = loop.run_until_complete(measure_rescan(args.rescan_files, Path(temp)))
    result["cpus"] = os.cpu_count()
    result["switch_interval_ms"] = round(sys.getswitchinterval() * 1000, 3)
    result["heap_objects"], result["frozen"] = len(heap), args.freeze
    print(f"{'':28}{'ticks':>8}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}")
    for label, row in (("UI thread, nothing running", result["idle"]), ("UI thread, indexing", result["indexing"]),
                       *((("UI thread, rescan", result["rescan"]["ui_during_rescan"]),) if "rescan" in result else ())):
        print(f"{label:28}{row['ticks']:>8}{row['p50_ms']:>9}{row['p99_ms']:>9}{row['max_ms']:>9}")
    print(f"\nindexed {result['files']:,} files ({result['bytes'] / 2**20:.1f} MB, {result['chunks']:,} chunks) in "
          f"{result['seconds']} s: {result['files_per_s']} files/s; goal p99 <= 16 ms: "
          f"{'met' if result['indexing']['p99_ms'] <= 16 else 'NOT met'}")
    if "rescan" in result:
        rescan = result["rescan"]
        print(f"rescan of {rescan['files']:,} unchanged files: {rescan['scan_and_compare_s']} s (scan and compare), "
              f"{rescan['service_rescan_s']} s through the service")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2))
    print(f"written: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
