"""Stands in for Kestrel in the orphan test: starts servers through a pool, prints their pids, then waits
to be killed."""

import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import psutil  # noqa: E402

from app.tools.pool import McpPool, ServerState  # noqa: E402
from tests.tools.conftest import python_server, time_server  # noqa: E402


async def main() -> None:
    # The sleeper ignores the end of its stdin, so only the kernel's death signal can end it.
    pool = McpPool(lambda: [python_server("hostile", "tools_server.py"), time_server(),
                            python_server("sleeper", "hangs.py")], start_timeout=600)
    sleeper = asyncio.get_running_loop().create_task(pool.tools(["sleeper"]))
    await pool.tools(["hostile", "time"])
    assert [status.state for status in pool.status()] == [ServerState.READY, ServerState.READY, ServerState.STARTING]
    for _ in range(200):
        if len(psutil.Process().children()) == 3:
            break
        await asyncio.sleep(0.05)
    print(json.dumps([child.pid for child in psutil.Process().children()]), flush=True)
    assert not sleeper.done()
    time.sleep(600)  # blocks the loop: nothing of the pool runs again before the kill


asyncio.run(main())
