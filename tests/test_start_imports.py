"""What the front ends import before anything is asked of them: the heavy libraries (numpy and what
brings it, the inference and speech runtimes, the network stacks) come only with the first use that
needs them, so the window, `kestrel chat` and the service start without their import time (numpy
alone: 0.1-0.25 s on two cores, paid again by every `kestrel` command and in every test that starts one)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("numpy", "llama_cpp", "onnxruntime", "onnxruntime_genai", "sounddevice", "faster_whisper",
         "ctranslate2", "av", "fastapi", "PIL", "mcp", "cryptography")
# The window's module, the chat command and the service it starts: imported, not run.
FRONT_ENDS = ("app.ui.main_window", "app.cli.chat", "app.service.root", "app.service.doors.voice")


def test_the_front_ends_import_no_heavy_library_before_it_is_needed() -> None:
    script = (f"import sys\nfor name in {FRONT_ENDS!r}:\n    __import__(name)\n"
              f"print(__import__('json').dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={"QT_QPA_PLATFORM": "offscreen", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
