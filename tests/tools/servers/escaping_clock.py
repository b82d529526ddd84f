"""A real MCP server that starts a program meant to outlive it: one that calls setsid() (a session of its
own, out of the server's process group) and sleeps; with --daemon it also forks again and its first
process exits, so the sleeper is an orphan, as a daemon makes itself. The sleeper's pid is written to
the file named first on the command line. With --hang, get_time never answers.
"""

import subprocess
import sys
import time

from mcp.server.mcpserver import MCPServer

SLEEPER = """
import os, sys, time
os.setsid()
if "--daemon" in sys.argv and os.fork():
    os._exit(0)
with open(sys.argv[1] + ".tmp", "w") as out:
    out.write(str(os.getpid()))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(300)
"""

server = MCPServer("escaping clock")
subprocess.Popen([sys.executable, "-c", SLEEPER, sys.argv[1], *sys.argv[2:]], stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@server.tool()
def get_time(zone: str) -> str:
    """The time in a time zone (never, with --hang)."""
    if "--hang" in sys.argv:
        time.sleep(300)
    return f"12:00 in {zone}"


if __name__ == "__main__":
    server.run()
