"""An API server over FakeAnswers in a process whose open files are used up but for a few
(`python -m tests.redteam.files_used_up_server SPARE`): it prints its address, and serves until
its stdin closes. For the case of a server that runs out of files while it accepts connections."""

from __future__ import annotations

import asyncio
import os
import sys

from app.core.server_settings import ServerSettings
from app.server.runner import ApiServer
from tests.server.helpers import KEY, FakeAnswers


def use_up_files(spare: int) -> list[int]:
    """Open /dev/null until no file is left, then close `spare` of them again; the rest stay open."""
    held: list[int] = []
    try:
        while True:
            held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    for fd in held[len(held) - spare:]:
        os.close(fd)
    return held[:len(held) - spare]


async def serve(spare: int) -> None:
    server = ApiServer(FakeAnswers(), lambda: ServerSettings(port=0, key=KEY))
    assert await server.start(), server.error
    use_up_files(spare)
    print(server.address, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await server.stop()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1])))
