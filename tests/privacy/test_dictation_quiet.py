"""Dictation opens no network socket and writes no audio: a whole dictation (microphone, voice activity, the
transcription child) traced by the kernel (strace -f), speech played into a private PulseAudio's microphone."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from app.voice.speech_models import WHISPER_TINY_EN, ensure_speech_model
from tests.helpers.pulse import ALSA_PULSE_DEVICE, pulse_server
from tests.helpers.speech import BECKETT, BECKETT_SAID, similarity, voice_or_skip
from tests.helpers.syscalls import run_traced
from tests.privacy.test_no_network import ROOT, app_env

# The window's dictation owner, driven as the mic button drives it; the recording is played into the
# microphone once it is open (paplay is traced too: a Unix socket to the sound server, as the app's own).
DICTATE = """
import asyncio, json, subprocess, sys
from pathlib import Path
from app.core.voice_settings import VoiceSettings
from app.service.voice.dictation_events import DictationFinished, DictationState
from app.service.voice.dictation_service import Dictation

async def main():
    tasks, finished = set(), []
    def spawn(coroutine):
        task = asyncio.get_running_loop().create_task(coroutine)
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return task
    settings = VoiceSettings(microphone=sys.argv[3], stop_at_end_of_speech=False)
    dictation = Dictation(lambda: settings, Path(sys.argv[1]), spawn)
    dictation.subscribe(lambda event: finished.append(event) if isinstance(event, DictationFinished) else None)
    assert dictation.start()
    while dictation.state is DictationState.OPENING:
        await asyncio.sleep(0.02)
    await asyncio.to_thread(subprocess.run, ["paplay", sys.argv[2]], timeout=60, check=True)
    await asyncio.sleep(1.5)  # the last words' hang-over, then the second press
    dictation.stop()
    while not finished:
        await asyncio.sleep(0.05)
    await dictation.close()
    print(json.dumps({"text": finished[0].text, "problem": str(finished[0].problem)}))

asyncio.run(main())
"""


def _audio_files(folder: Path, smallest: int) -> list[str]:
    """Files under folder that could hold the recording: a RIFF/WAVE header, or as many bytes as its PCM."""
    found = []
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if data[:4] == b"RIFF" or len(data) >= smallest:
                found.append(str(path.relative_to(folder)))
    return found


def test_a_dictation_opens_no_network_socket_and_writes_no_audio(tmp_path: Path, kestrel_home: Path) -> None:
    voice_or_skip()
    speech = tmp_path / "speech"
    ensure_speech_model(WHISPER_TINY_EN, speech)
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    with pulse_server(tmp_path / "pulse") as pulse:
        env = dict(app_env(kestrel_home), PULSE_SERVER=pulse.address, TMPDIR=str(temporary))
        traced = run_traced([sys.executable, "-c", DICTATE, str(speech), str(BECKETT), ALSA_PULSE_DEVICE],
                            tmp_path, env=env, cwd=ROOT, timeout=240)
    assert traced.returncode == 0, traced.stderr
    result = json.loads(traced.stdout.strip().splitlines()[-1])
    assert similarity(result["text"], BECKETT_SAID) >= 0.7, result
    assert traced.network == [], traced.network
    # The transcription child ran under the trace (strace -f follows it): its end is in the log.
    assert "CLD_EXITED" in traced.log, traced.log[-2000:]
    smallest = BECKETT.stat().st_size // 4  # the recording, even resampled to 16 kHz mono, takes more than this
    assert _audio_files(temporary, smallest) == [], "no audio in the temporary folder"
    assert not kestrel_home.exists() or _audio_files(kestrel_home, smallest) == [], "no audio in Kestrel's folders"

