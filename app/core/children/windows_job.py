"""Windows job objects: each Python child of Kestrel in a job that Windows kills when Kestrel's handle to it closes.

A process's handles close when it ends, however it ends (a crash, Task Manager), so a job made with
JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE takes the child, and everything the child started, with Kestrel:
Windows' answer to Linux's death signal. The job's handle is not inheritable (no security attributes),
so no child holds its own job open. Where the owner caps the child's memory, the job holds it to that
much committed memory (JOB_OBJECT_LIMIT_PROCESS_MEMORY), as RLIMIT_AS does elsewhere.

Written against kernel32 through ctypes, behind `contain` and `WindowsJob`; there is no Windows here, so
its tests feed it a recorded kernel32 (tests/core/test_children_windows.py).
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

JOB_OBJECT_EXTENDED_LIMIT_INFORMATION = 9  # JOBOBJECTINFOCLASS: JobObjectExtendedLimitInformation
JOB_OBJECT_LIMIT_PROCESS_MEMORY = 0x100
JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000
PROCESS_SET_QUOTA = 0x100
PROCESS_TERMINATE = 0x1
# The exit code of processes ended with their job (TerminateJobObject), as TerminateProcess gives.
KILLED_EXIT_CODE = 1


class BasicLimits(ctypes.Structure):
    """JOBOBJECT_BASIC_LIMIT_INFORMATION."""

    _fields_ = [("PerProcessUserTimeLimit", ctypes.c_int64), ("PerJobUserTimeLimit", ctypes.c_int64),
                ("LimitFlags", ctypes.c_uint32), ("MinimumWorkingSetSize", ctypes.c_size_t),
                ("MaximumWorkingSetSize", ctypes.c_size_t), ("ActiveProcessLimit", ctypes.c_uint32),
                ("Affinity", ctypes.c_size_t), ("PriorityClass", ctypes.c_uint32), ("SchedulingClass", ctypes.c_uint32)]


class IoCounters(ctypes.Structure):
    """IO_COUNTERS."""

    _fields_ = [(name, ctypes.c_uint64) for name in ("ReadOperationCount", "WriteOperationCount",
                                                     "OtherOperationCount", "ReadTransferCount",
                                                     "WriteTransferCount", "OtherTransferCount")]


class ExtendedLimits(ctypes.Structure):
    """JOBOBJECT_EXTENDED_LIMIT_INFORMATION."""

    _fields_ = [("BasicLimitInformation", BasicLimits), ("IoInfo", IoCounters),
                ("ProcessMemoryLimit", ctypes.c_size_t), ("JobMemoryLimit", ctypes.c_size_t),
                ("PeakProcessMemoryUsed", ctypes.c_size_t), ("PeakJobMemoryUsed", ctypes.c_size_t)]


def job_limits(memory_bytes: int | None) -> ExtendedLimits:
    """Kill on close always; a cap on each process's committed memory where the owner set one."""
    limits = ExtendedLimits()
    limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
    if memory_bytes is not None:
        limits.BasicLimitInformation.LimitFlags |= JOB_OBJECT_LIMIT_PROCESS_MEMORY
        limits.ProcessMemoryLimit = memory_bytes
    return limits


class WindowsJob:
    """The job one child runs in; Kestrel's handle to it is the child's life line."""

    def __init__(self, kernel32: Any, handle: Any) -> None:
        self._kernel32, self._handle = kernel32, handle

    def terminate(self) -> None:
        """End every process in the job now (the child and what it started)."""
        if self._handle is not None:
            self._kernel32.TerminateJobObject(self._handle, KILLED_EXIT_CODE)

    def close(self) -> None:
        """Close Kestrel's handle: Windows ends whatever is still in the job (kill on close)."""
        handle, self._handle = self._handle, None
        if handle is not None:
            self._kernel32.CloseHandle(handle)


def contain(pid: int, memory_bytes: int | None) -> WindowsJob | None:
    """Put the process pid in a new job that dies with Kestrel and holds it to memory_bytes (None: no
    cap). None off Windows, and where Windows refuses (the child runs on as before, and the registry
    still ends it when Kestrel exits normally)."""
    kernel32 = _kernel32()
    if kernel32 is None:
        return None
    job = kernel32.CreateJobObjectW(None, None)
    if not job:
        return None
    limits = job_limits(memory_bytes)
    process = None
    try:
        if not kernel32.SetInformationJobObject(job, JOB_OBJECT_EXTENDED_LIMIT_INFORMATION, ctypes.byref(limits),
                                                ctypes.sizeof(limits)):
            raise OSError("SetInformationJobObject")
        process = kernel32.OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE, False, pid)
        if not process or not kernel32.AssignProcessToJobObject(job, process):
            raise OSError("AssignProcessToJobObject")
    except OSError:
        kernel32.CloseHandle(job)  # nothing is in it yet: closing it ends nothing
        return None
    finally:
        if process:
            kernel32.CloseHandle(process)
    return WindowsJob(kernel32, job)


def _kernel32() -> Any:
    """kernel32 with the signatures this module calls (handles are pointers on 64-bit Windows); None elsewhere."""
    if sys.platform != "win32":
        return None
    dll = ctypes.WinDLL("kernel32", use_last_error=True)
    handle, dword = ctypes.c_void_p, ctypes.c_uint32
    dll.CreateJobObjectW.restype = handle
    dll.CreateJobObjectW.argtypes = (ctypes.c_void_p, ctypes.c_wchar_p)
    dll.SetInformationJobObject.argtypes = (handle, ctypes.c_int, ctypes.c_void_p, dword)
    dll.OpenProcess.restype = handle
    dll.OpenProcess.argtypes = (dword, ctypes.c_int, dword)
    dll.AssignProcessToJobObject.argtypes = (handle, handle)
    dll.TerminateJobObject.argtypes = (handle, ctypes.c_uint)
    dll.CloseHandle.argtypes = (handle,)
    return dll
