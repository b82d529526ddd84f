"""How long a chat saved by another process takes to reach the window's chat list.

    python benchmarks/history_follow.py [--runs 10]

The service (no model, no engine started) opens a history in a temporary home and
watches it (app/service/history_watch.py); a child Python commits one new chat with
HistoryStore and prints the wall time just after its commit. Measured: from that commit
to the ConversationsListed that holds the chat (the watch's look, the event, the list
read on the writer thread). Goal: under 1 s every time; the look interval is 250 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHILD = ("import sys, time; from app.core.store.history import HistoryStore; "
         "s = HistoryStore(sys.argv[1]); s.create_conversation(title=sys.argv[2]); print(time.time())")


async def measure(runs: int) -> list[float]:
    from app.core.paths import data_paths
    from app.library.models import ModelLibrary
    from app.service import events as ev
    from app.service.doors.history import HistoryDoor
    from app.service.models.client import EngineClient
    from app.service.root import Service

    paths = data_paths().ensure()
    service = Service(history_path=paths.history_db, settings_path=paths.settings_file,
                      library=ModelLibrary(paths.models), client=EngineClient())
    history = HistoryDoor(service)
    arrived: dict[str, float] = {}

    def heard(event: ev.Event) -> None:
        if isinstance(event, ev.HistoryChangedElsewhere):  # as the window's adapter follows it
            service.spawn(history.follow_history())
        elif isinstance(event, ev.ConversationsListed):
            for conversation in event.conversations:
                arrived.setdefault(conversation.title, time.time())

    service.subscribe(heard)
    await service.open()
    await service.elsewhere.watch()  # start_up() starts the watch; this opens the history alone
    delays = []
    try:
        for run in range(runs):
            title = f"run {run}"
            done = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", CHILD, str(paths.history_db), title],
                                           cwd=ROOT, capture_output=True, text=True, check=True)
            committed = float(done.stdout.strip())
            deadline = time.monotonic() + 10
            while title not in arrived and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
            delays.append(arrived[title] - committed)
    finally:
        await service.shutdown()
    return delays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["KESTREL_HOME"] = home
        delays = asyncio.run(measure(args.runs))
    ms = sorted(d * 1000 for d in delays)
    print(f"commit elsewhere -> chat listed, {len(ms)} runs: median {statistics.median(ms):.0f} ms, "
          f"max {ms[-1]:.0f} ms (goal: under 1000 ms)")


if __name__ == "__main__":
    main()
