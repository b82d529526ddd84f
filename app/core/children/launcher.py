"""The Linux death signal every child of Kestrel sets, and the supervisor a command child (an MCP server) runs under.

`die_with_parent` is the one place Kestrel asks Linux for a death signal: a Python child sets it first
thing (app/core/children/in_child.py), and this file's supervisor sets it for itself and for the server.

Run as `python -I -S launcher.py KESTREL_PID [--cgroup PATH] COMMAND ARGS...`, it stays as the command's
parent, a supervisor that:
- dies with Kestrel: PR_SET_PDEATHSIG sends it SIGTERM when Kestrel dies, however it dies;
- keeps every descendant within reach: as a child subreaper (PR_SET_CHILD_SUBREAPER), a program
  that leaves its parent (setsid() and a second fork, as daemons do) becomes its child, not init's;
- puts the command in the cgroup Kestrel made for it (--cgroup, app/core/children/cgroup.py), where the
  system lets Kestrel make one: cgroup.kill then ends the whole tree at once, with no race against a
  fork, and the cgroup still holds whatever the supervisor could not reach.
When the command ends, or Kestrel ends it (SIGTERM to the process group) or dies, the supervisor gives
it a moment to finish, kills every process left under it and exits with the command's status.
Standalone on purpose (the standard library only, no app import): it runs before the server, so it must
start in a few hundredths of a second, and `-I` keeps the server's environment (PYTHONPATH) out of it.
"""

from __future__ import annotations

import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1  # linux/prctl.h
PR_SET_CHILD_SUBREAPER = 36
EXIT_NOT_RUN = 127  # what a shell gives for a command it could not run
# How long a server asked to end may take before everything under the supervisor is killed; less
# than the MCP SDK's wait between its SIGTERM and its SIGKILL to the group (2 s), so the supervisor
# finishes its work before the SDK's SIGKILL could reach it.
GRACE_S = 1.0
# How long the supervisor goes on killing and reaping what is left (a fork bomb cannot hold it).
CLEANUP_S = 5.0
if sys.platform != "win32":  # Windows, which has neither signal, imports this module for die_with_parent and GRACE_S
    _ASKED_TO_END = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    _WATCHED = {signal.SIGCHLD, *_ASKED_TO_END}


def _prctl(option: int, value: int) -> bool:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.prctl(option, value, 0, 0, 0) == 0)


def die_with_parent(parent_pid: int, death_signal: int) -> bool:
    """Ask the kernel to send death_signal to this process when its parent dies; False where that cannot
    be done, or when the parent is already gone (it died before the request took effect).

    Linux counts the *thread* that started the process as its parent: Kestrel starts its Python children
    from a thread that lives as long as it does (app/core/children/python_child.py)."""
    if not sys.platform.startswith("linux") or not _prctl(PR_SET_PDEATHSIG, death_signal):
        return False
    return os.getppid() == parent_pid


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] == "--cgroup" and len(argv) < 4:
        sys.stderr.write("usage: launcher.py PARENT_PID [--cgroup PATH] COMMAND [ARGS...]\n")
        return 2
    parent, rest = int(argv[0]), argv[1:]
    cgroup = None
    if rest[0] == "--cgroup":
        cgroup, rest = rest[1], rest[2:]
    # Blocked before anything can arrive: each is taken in turn by the loop below, never by a handler.
    original = signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)
    if not die_with_parent(parent, signal.SIGTERM):
        return 1  # Kestrel died while this started: the server must not run without it
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    supervisor = os.getpid()
    server = os.fork()
    if server == 0:
        _become_server(supervisor, cgroup, rest, original)
    _quiet_stdio()
    status = _supervise(parent, server)
    _end_everything(cgroup)
    return status


def _become_server(supervisor: int, cgroup: str | None, command: list[str], mask: set[int | signal.Signals]) -> None:
    """In the forked child: die with the supervisor, join the cgroup, then exec the server."""
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if not die_with_parent(supervisor, signal.SIGKILL):
            os._exit(1)
        if cgroup is not None:
            _join(cgroup)
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"{command[0]}: {exc.strerror or exc}\n")
        sys.stderr.flush()
    os._exit(EXIT_NOT_RUN)


def _join(cgroup: str) -> None:
    try:
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as procs:
            procs.write(str(os.getpid()))
    except OSError:
        pass  # refused (the system's rules): the supervisor alone keeps the tree within reach


def _quiet_stdio() -> None:
    """Let go of Kestrel's pipes: the server alone holds them, so Kestrel sees its output end when it does."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    os.close(null)


def _supervise(parent: int, server: int) -> int:
    """Wait for the server to end, or to be asked to end (then it gets GRACE_S); its exit status."""
    deadline = None
    while True:
        # Signals wake it at once; the timeout only backs up the death signal (checked by getppid) and,
        # once an end was asked, watches the grace time.
        info = signal.sigtimedwait(_WATCHED, 5.0 if deadline is None else 0.05)
        status, _ = _reap(server)
        if status is not None:
            return status
        asked = info is not None and info.si_signo in _ASKED_TO_END
        if deadline is None and (asked or os.getppid() != parent):
            deadline = time.monotonic() + GRACE_S
            _signal(server, signal.SIGTERM)  # Kestrel's own death sends the server nothing
        if deadline is not None and time.monotonic() >= deadline:
            return 128 + signal.SIGTERM


def _reap(server: int) -> tuple[int | None, bool]:
    """Reap every child that has ended (orphans handed to this subreaper too): the server's exit status
    when it was among them, and whether any child is left."""
    status = None
    while True:
        try:
            pid, raw = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status, False
        if pid == 0:
            return status, True
        if pid == server:
            code = os.waitstatus_to_exitcode(raw)
            status = 128 - code if code < 0 else code


def _end_everything(cgroup: str | None) -> None:
    """Kill every process under the supervisor (and in the cgroup), reap them, remove the cgroup."""
    if cgroup is not None:
        _write(os.path.join(cgroup, "cgroup.kill"), "1")
    deadline = time.monotonic() + CLEANUP_S
    while time.monotonic() < deadline:
        _, children = _reap(0)
        left = _descendants(os.getpid())
        if not left and not children:
            break
        for pid in left:
            _signal(pid, signal.SIGKILL)
        time.sleep(0.01)
    if cgroup is not None:
        while time.monotonic() < deadline:
            try:
                os.rmdir(cgroup)  # refused (EBUSY) until the killed processes are all gone
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.01)


def _descendants(root: int) -> list[int]:
    """The live (not zombie) processes below root, read from /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended meanwhile
        if fields and fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(name))
    found, queue = [], list(children.get(root, ()))
    while queue:
        pid = queue.pop()
        found.append(pid)
        queue.extend(children.get(pid, ()))
    return found


def _signal(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except OSError:
        pass  # gone already


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w") as out:
            out.write(text)
    except OSError:
        pass  # gone already, or not this kernel's (cgroup.kill is Linux 5.14+): the kill loop does it


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
