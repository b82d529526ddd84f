"""The supervisor of Kestrel's child processes: how each starts, under what limits, and how it ends with Kestrel.

Every owner of a child process goes through here: the engine and the embedding child, the document
reader and the image check (Python children, python_child.py), and the MCP stdio servers (command
children, commands.py). Plain Python, no Qt, no import of any other part of app: it runs in children too.

- Start: a Python child is multiprocessing's spawn, started from one thread that lives as long as
  Kestrel, with its limits (in_child.py: memory, priority, Ctrl+C); a command child is started by the
  MCP SDK with the command line given here (launcher.py on Linux, a cgroup where allowed, cgroup.py).
- Stop: each owner asks its child to end in its own words (Shutdown, Close, None over the pipe; the
  SDK closes a server's stdin), then the supervisor kills it if it has not (PythonChild.end,
  CommandChild.end_group / end_cgroup).
- Kestrel's exit: registry.py ends every child still registered (SIGTERM, a moment, SIGKILL of what is
  left), before multiprocessing's own exit handler could wait for a stuck one for ever.
- A Kestrel killed outright (SIGKILL, a crash), where no exit code runs: on Linux each Python child has
  the death signal (SIGKILL, launcher.die_with_parent) and each MCP server's supervisor has it too (it then
  kills the server's whole tree and cgroup); on Windows each Python child is in a job object that Windows
  kills when Kestrel's handle closes (windows_job.py), and each MCP server in the SDK's; on macOS a
  Python child watches for its parent to change, and an MCP server ends when its stdin closes.
"""
