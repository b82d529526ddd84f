"""Transcribing opens no network socket: `kestrel transcribe` traced by the kernel (strace -f), the child process included."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.helpers.speech import BECKETT, BECKETT_SAID, similarity, voice_or_skip
from tests.helpers.syscalls import run_traced
from tests.privacy.test_no_network import ROOT, app_env


def test_transcribing_a_recording_opens_no_socket(tmp_path: Path, kestrel_home: Path) -> None:
    voice_or_skip()
    traced = run_traced([sys.executable, "-m", "app", "transcribe", str(BECKETT)], tmp_path,
                        env=app_env(kestrel_home), cwd=ROOT, timeout=180)
    assert traced.returncode == 0, traced.stderr
    assert similarity(traced.stdout, BECKETT_SAID) >= 0.8, traced.stdout
    assert traced.network == [], traced.network
    # The transcription child ran under the trace (strace -f follows it): its end is in the log.
    assert "CLD_EXITED" in traced.log, traced.log
