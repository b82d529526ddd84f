"""Nothing Kestrel does on its own opens a network socket or sends a DNS query.

Checked by the kernel's account of the whole process tree (strace -f, see
tests/helpers/syscalls.py), so native code counts: ONNX Runtime's telemetry thread looked
up mobile.events.data.microsoft.com about 9 s after the import, which Python audit hooks
never saw. Hence the window is watched for well past that.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.helpers.syscalls import findings, run_traced, run_traced_for
from tests.ui.conftest import install_model

ROOT = Path(__file__).resolve().parents[2]
TINY_ONNX = ROOT / "tests" / "fixtures" / "tiny-onnx"
# ONNX Runtime's uploader first looked up its host about 9 s after the import, then at
# about +6, +14 and +35 s.
TELEMETRY_DELAY_S = 9
WATCH_S = TELEMETRY_DELAY_S + 6


def app_env(home: Path) -> dict[str, str]:
    env = dict(os.environ, KESTREL_HOME=str(home), QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    # Not inherited from a developer's shell: the app itself must turn telemetry off.
    env.pop("ORT_DISABLE_TELEMETRY", None)
    return env


def test_the_trace_sees_a_dns_query_and_a_connection(tmp_path: Path, kestrel_home: Path) -> None:
    code = ("import socket\n"
            "try:\n    socket.getaddrinfo('kestrel-privacy-check.invalid', 80)\nexcept OSError:\n    pass\n"
            "try:\n    socket.create_connection(('127.0.0.1', 9), timeout=1)\nexcept OSError:\n    pass\n")
    traced = run_traced([sys.executable, "-c", code], tmp_path, env=app_env(kestrel_home))
    assert traced.returncode == 0, traced.stderr
    assert any("AF_INET" in line and "htons(9)" in line for line in traced.network), traced.log
    # The resolver's own socket (to the name server on port 53, or nscd's Unix socket
    # where that runs) is there too: a lookup leaves a trace either way.
    assert len(traced.network) >= 2, traced.log


def test_local_pipes_are_not_findings() -> None:
    log = ('12 socketpair(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC, 0, [5, 6]) = 0\n'
           '12 connect(7, {sa_family=AF_UNIX, sun_path="/tmp/x"}, 110) = 0\n'
           '13 socket(AF_INET6, SOCK_DGRAM, IPPROTO_IP) = 8\n'
           '13 connect(9, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.0.0.53")}, 16 <unfinished ...>\n'
           '14 socket(AF_NETLINK, SOCK_RAW|SOCK_CLOEXEC, NETLINK_ROUTE) = 4\n')
    assert [line.split()[0] for line in findings(log)] == ["13", "13", "14"]


@pytest.mark.slow
def test_onnx_runtime_imported_through_kestrel_stays_quiet(tmp_path: Path, kestrel_home: Path) -> None:
    """The defect itself: ONNX Runtime loaded and left alone past its telemetry delay."""
    code = f"import app, onnxruntime, onnxruntime_genai, time\ntime.sleep({WATCH_S})"
    traced = run_traced([sys.executable, "-c", code], tmp_path, env=app_env(kestrel_home), cwd=ROOT)
    assert traced.returncode == 0, traced.stderr
    assert traced.network == []


def test_chat_and_doctor_open_no_socket(tmp_path: Path, tiny_model: Path, kestrel_home: Path) -> None:
    for args in (["chat", "--model", str(tiny_model), "--max-tokens", "8", "hello, secret words"],
                 ["chat", "--model", str(TINY_ONNX), "--max-tokens", "8", "hello, secret words"],
                 ["doctor", "--json"]):
        traced = run_traced([sys.executable, "-m", "app", *args], tmp_path, env=app_env(kestrel_home), cwd=ROOT)
        assert traced.returncode == 0, traced.stderr
        assert traced.network == [], args


@pytest.mark.slow
def test_the_window_opens_no_socket(tmp_path: Path, tiny_model: Path, kestrel_home: Path) -> None:
    """Start-up, the hardware probe (ONNX Runtime's device discovery), the model load, and
    then idle for longer than ONNX Runtime's telemetry waited."""
    install_model(tiny_model)
    traced = run_traced_for([sys.executable, "-m", "app"], tmp_path, WATCH_S, env=app_env(kestrel_home), cwd=ROOT)
    assert traced.returncode == 0, traced.stderr
    assert traced.network == []


class _Library:
    def __init__(self, fails: bool = False) -> None:
        self.calls, self.fails = 0, fails

    def disable_telemetry_events(self) -> None:
        self.calls += 1
        if self.fails:
            raise RuntimeError("not in this build")


def test_windows_builds_get_their_etw_telemetry_turned_off() -> None:
    """The Windows onnxruntime.dll has no 1DS uploader but logs TraceLogging events
    (WindowsTelemetry in its strings); only disable_telemetry_events() stops those."""
    from app.hardware.onnx_source import quiet_windows_telemetry

    windows, linux, broken = _Library(), _Library(), _Library(fails=True)
    assert quiet_windows_telemetry(windows, "Windows") and windows.calls == 1
    assert not quiet_windows_telemetry(linux, "Linux") and linux.calls == 0
    assert not quiet_windows_telemetry(broken, "Windows") and broken.calls == 1
    assert not quiet_windows_telemetry(object(), "Windows")
