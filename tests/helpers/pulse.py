"""A private PulseAudio server for the audio-device tests: a null sink as the speaker, its monitor as the microphone.

PortAudio (sounddevice) reaches it as Linux apps do: through ALSA's "pulse" device (libasound2-plugins),
which connects to the server in PULSE_SERVER. What the fixture runs, with RUNTIME a fresh temporary folder
(HOME, XDG_RUNTIME_DIR, PULSE_RUNTIME_PATH and PULSE_STATE_PATH all point there, so the person's own
sound server and its settings are never touched):

    pulseaudio --daemonize=no -n --exit-idle-time=-1 --use-pid-file=no --disable-shm=yes \\
        --log-target=stderr \\
        --load="module-native-protocol-unix socket=RUNTIME/native auth-anonymous=1" \\
        --load="module-null-sink sink_name=kestrel_speaker"
    PULSE_SERVER=unix:RUNTIME/native pactl set-default-source kestrel_speaker.monitor

-n loads no default.pa (no real card, no D-Bus); without the null-sink line the server has no source and no
sink: the "no microphone" case. Needs `apt-get install pulseaudio libportaudio2 libasound2-plugins`
(Debian/Ubuntu); skips with the reason where those are missing.
"""

from __future__ import annotations

import ctypes.util
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

SINK = "kestrel_speaker"
MONITOR = f"{SINK}.monitor"
# With room=True a second null sink is the room the person speaks in: its monitor is the microphone, so the
# microphone hears what a test plays into the room and not what Kestrel plays (as with headphones).
ROOM = "kestrel_room"
# With loudspeakers=True (and room) the room also hears the speaker, as a laptop's microphone hears its own
# loudspeakers: a loopback from the speaker's monitor into the room, quieter than the person (PulseAudio's
# volume is cubic: 60% is about -13 dB) and late by a fixed 200 ms (adjust_time=0: no rate adjustment, which
# with 60 ms grew the delay under load).
LOUDSPEAKER_VOLUME = "60%"
LOUDSPEAKER_LATENCY_MS = 200
# The ALSA device that goes through the PulseAudio plugin: what the tests pick by name.
ALSA_PULSE_DEVICE = "pulse"


@dataclass
class PulseServer:
    """A running private server: its address, the environment its clients need, and pactl on it."""

    runtime: Path
    process: subprocess.Popen[bytes]

    @property
    def address(self) -> str:
        return f"unix:{self.runtime}/native"

    def pactl(self, *args: str) -> str:
        done = subprocess.run(["pactl", *args], env={**os.environ, "PULSE_SERVER": self.address},
                              capture_output=True, text=True, timeout=10)
        if done.returncode != 0:
            raise RuntimeError(f"pactl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def source_outputs(self) -> list[str]:
        """The recording streams clients have open on the server now (one per microphone opened; the
        loudspeakers' loopback, the server's own, is not one)."""
        return [line for line in self.pactl("list", "short", "source-outputs").splitlines()
                if line.strip() and line.split("\t")[2] != "-"]

    def unload_null_sink(self) -> None:
        """The speaker and its monitor go, as a USB headset does when it is pulled out."""
        self.pactl("unload-module", "module-null-sink")

    def subscribe(self) -> subprocess.Popen[str]:
        """`pactl subscribe`: every object the server creates from now on, one line each, until killed."""
        return subprocess.Popen(["pactl", "subscribe"], env={**os.environ, "PULSE_SERVER": self.address},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def pulse_or_skip() -> None:
    """Skip unless PulseAudio, pactl, sounddevice and the PortAudio library are here."""
    if shutil.which("pulseaudio") is None or shutil.which("pactl") is None:
        pytest.skip("PulseAudio is not installed (apt-get install pulseaudio libportaudio2 libasound2-plugins)")
    # Looked for, not imported: importing sounddevice starts PortAudio, which the tests do only once
    # PULSE_SERVER names the private server.
    if importlib.util.find_spec("sounddevice") is None:
        pytest.skip("sounddevice is not installed (pip install sounddevice)")
    if ctypes.util.find_library("portaudio") is None and sys.platform.startswith("linux"):
        pytest.skip("the PortAudio library is missing (apt-get install libportaudio2)")
    if not Path("/usr/share/alsa/alsa.conf.d/50-pulseaudio.conf").exists() and \
            not Path("/etc/alsa/conf.d/50-pulseaudio.conf").exists():
        pytest.skip("ALSA's PulseAudio plugin is missing (apt-get install libasound2-plugins)")


@contextmanager
def pulse_server(runtime: Path, *, with_speaker: bool = True, room: bool = False,
                 loudspeakers: bool = False) -> Iterator[PulseServer]:
    """A private PulseAudio in runtime; with_speaker: the null sink (and so a microphone: its monitor);
    room: a second null sink (ROOM) whose monitor is the microphone instead; loudspeakers (with room): the
    room hears the speaker too, quieter (LOUDSPEAKER_VOLUME)."""
    pulse_or_skip()
    runtime.mkdir(parents=True, exist_ok=True)
    loads = [f"--load=module-native-protocol-unix socket={runtime}/native auth-anonymous=1"]
    if with_speaker:
        loads.append(f"--load=module-null-sink sink_name={SINK}")
    if room:
        loads.append(f"--load=module-null-sink sink_name={ROOM}")
    env = {**os.environ, "HOME": str(runtime), "XDG_RUNTIME_DIR": str(runtime), "PULSE_RUNTIME_PATH": str(runtime),
           "PULSE_STATE_PATH": str(runtime)}
    log = (runtime / "pulseaudio.log").open("wb")
    process = subprocess.Popen(["pulseaudio", "--daemonize=no", "-n", "--exit-idle-time=-1", "--use-pid-file=no",
                                "--disable-shm=yes", "--log-target=stderr", *loads],
                               env=env, stdout=log, stderr=log, cwd=runtime)
    server = PulseServer(runtime, process)
    try:
        _wait_ready(server)
        if with_speaker:
            server.pactl("set-default-sink", SINK)
            server.pactl("set-default-source", f"{ROOM}.monitor" if room else MONITOR)
        if loudspeakers and room:
            server.pactl("load-module", "module-loopback", f"source={MONITOR}", f"sink={ROOM}", "adjust_time=0",
                         f"latency_msec={LOUDSPEAKER_LATENCY_MS}", "source_dont_move=true", "sink_dont_move=true")
            loop = server.pactl("list", "short", "sink-inputs").split("\t")[0]
            server.pactl("set-sink-input-volume", loop, LOUDSPEAKER_VOLUME)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        log.close()


def _wait_ready(server: PulseServer) -> None:
    deadline = time.monotonic() + 15
    while True:
        if server.process.poll() is not None:
            log = (server.runtime / "pulseaudio.log").read_text(errors="replace")
            pytest.skip(f"PulseAudio could not start here: {log.strip()[-500:]}")
        try:
            server.pactl("info")
            return
        except (RuntimeError, subprocess.TimeoutExpired):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
