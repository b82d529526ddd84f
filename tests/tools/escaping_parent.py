"""Stands in for Kestrel in the orphan tests: starts the escaping clock (its sleeper in a session of its own,
an orphan) through a pool, prints the supervisor's pid once the sleeper runs, then waits to be killed.
With --no-cgroup, the server gets no cgroup, as where the system allows none."""

import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import psutil  # noqa: E402

from app.core.children import cgroup  # noqa: E402
from app.tools.pool import McpPool  # noqa: E402
from tests.tools.conftest import python_server  # noqa: E402


async def main(pid_file: Path) -> None:
    if "--no-cgroup" in sys.argv:
        cgroup.make_cgroup = lambda token: None
    pool = McpPool(lambda: [python_server("clock", "escaping_clock.py", str(pid_file), "--daemon")])
    await pool.tools(["clock"])
    while not pid_file.exists():
        await asyncio.sleep(0.05)
    print(json.dumps([child.pid for child in psutil.Process().children()]), flush=True)
    time.sleep(600)  # blocks the loop: nothing of the pool runs again before the kill


asyncio.run(main(Path(sys.argv[1])))
