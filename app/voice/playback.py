"""Playing PCM to a chosen output (read-aloud): play() returns at once, stop() silences it at once.

stop() aborts the stream, which drops what PortAudio and the driver still hold instead of playing it
out, so the sound ends within a block or two (12 ms blocks, low latency) rather than after the buffer.
Each block played is written to the echo check's record (app/voice/echo.py) with the time it sounds, so
that the microphone can tell Kestrel's voice from the person's.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from app.voice.devices import pick_device, problem_of, sound_library, stream_closed, stream_opened
from app.voice.echo import SPOKEN, SpokenSound, SpokenStream

# Small blocks: stop() and the end of a sound are heard within one, and the callback has little to copy.
_BLOCK_S = 0.012


class PlaybackEnd(StrEnum):
    FINISHED = "finished"
    STOPPED = "stopped"
    DEVICE_LOST = "device_lost"


@dataclass(frozen=True)
class PlaybackEnded:
    how: PlaybackEnd
    played_samples: int


class Playback:
    """One sound at a time on one output (device: its name, None for the default)."""

    def __init__(self, device: str | None = None, *, platform: str = sys.platform, close_s: float = 2.0,
                 spoken: SpokenSound = SPOKEN) -> None:
        self._device_name = device
        self._spoken_sound = spoken
        self._platform = platform
        self._close_s = close_s
        self._stream: Any = None
        self._pcm: npt.NDArray[np.int16] = np.zeros(0, dtype=np.int16)
        self._at = 0
        self._stopped = False
        self._done = threading.Event()
        self._ended: PlaybackEnded | None = None
        self._taking = threading.Lock()  # stop() and wait() may come from two threads: one closes the stream
        self._spoken: SpokenStream | None = None  # what is played, for the microphone's echo check
        self._latency = 0.0
        self.device_used = ""

    @property
    def playing(self) -> bool:
        return self._stream is not None and not self._done.is_set()

    def play(self, pcm: npt.NDArray[np.int16], rate: int) -> None:
        """Start playing mono 16-bit samples at rate (a sound still playing is stopped first)."""
        self.stop()
        sd = sound_library()
        device = pick_device(self._device_name, microphone=False)
        self._pcm, self._at, self._stopped, self._ended = pcm.reshape(-1).astype(np.int16), 0, False, None
        self._done = threading.Event()
        stream_opened()
        try:
            stream = sd.OutputStream(samplerate=rate, channels=1, dtype="int16", device=device.index,
                                     blocksize=max(1, round(rate * _BLOCK_S)), latency="low",
                                     callback=self._fill, finished_callback=self._done.set)
        except sd.PortAudioError as exc:
            stream_closed()
            raise problem_of(str(exc), microphone=False, platform=self._platform) from exc
        self.device_used = device.name
        self._spoken, self._latency = self._spoken_sound.begin(rate), float(getattr(stream, "latency", 0.0) or 0.0)
        self._stream = stream
        try:
            stream.start()
        except sd.PortAudioError as exc:
            self._close(stream)
            raise problem_of(str(exc), microphone=False, platform=self._platform) from exc

    def stop(self) -> PlaybackEnded | None:
        """Silence it now; how it ended (None when nothing was playing)."""
        stream = self._taken()
        if stream is None:
            return self._ended
        self._stopped = True
        self._close(stream)
        return self._finish()

    def wait(self, timeout: float) -> PlaybackEnded | None:
        """How the sound ended, waiting up to timeout; None while it still plays. A device unplugged
        mid-sound ends it early: DEVICE_LOST, with the samples played so far."""
        if self._stream is None:
            return self._ended
        if not self._done.wait(timeout):
            return None
        stream = self._taken()
        if stream is not None:
            self._close(stream)
        return self._finish()

    def _taken(self) -> Any:
        with self._taking:
            stream, self._stream = self._stream, None
        return stream

    def _finish(self) -> PlaybackEnded:
        if self._stopped:
            how = PlaybackEnd.STOPPED
        else:
            how = PlaybackEnd.FINISHED if self._at >= self._pcm.size else PlaybackEnd.DEVICE_LOST
        self._ended = PlaybackEnded(how, min(self._at, self._pcm.size))
        return self._ended

    def _fill(self, outdata: npt.NDArray[np.int16], frames: int, when: Any, status: Any) -> None:
        """PortAudio's callback: the next samples, silence after the end, and the stream stopped there."""
        chunk = self._pcm[self._at:self._at + frames]
        outdata[:chunk.size, 0] = chunk
        outdata[chunk.size:, 0] = 0
        spoken = self._spoken
        if spoken is not None and chunk.size:
            spoken.played(chunk, time.monotonic() + self._latency)
        self._at += frames
        if self._at >= self._pcm.size:
            raise sound_library().CallbackStop()

    def _close(self, stream: Any) -> None:
        """Abort (drop what is queued) and close in a bounded side thread: a vanished device never holds the caller."""

        def close() -> None:
            try:
                stream.abort()
                stream.close()
            except Exception:  # PortAudio's errors closing a stream whose device is gone
                pass
            finally:
                stream_closed()
                self._done.set()

        closer = threading.Thread(target=close, name="kestrel-playback-close", daemon=True)
        closer.start()
        closer.join(self._close_s)

